package observe

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"github.com/meshbus/mesh/stand-ins/predecessor/report"
)

// TestASnapshotWaitsForTheListingToShowTheOpenConnection: the management
// API lists a connection only after the broker's first statistics for it;
// a snapshot taken before that waits for it rather than noting the
// stand-in's connection missing (which the next snapshot then saw
// "appear": the adoption bed's failure once the raise got faster).
func TestASnapshotWaitsForTheListingToShowTheOpenConnection(t *testing.T) {
	var listings atomic.Int32
	mgmt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/users/legacy-app":
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "legacy-app", "tags": []string{}, "password_hash": "h", "hashing_algorithm": "sha256"})
		case r.URL.Path == "/api/connections":
			if listings.Add(1) < 3 {
				_, _ = w.Write([]byte(`[]`)) // not yet in the statistics
				return
			}
			_, _ = w.Write([]byte(`[{"user":"legacy-app","vhost":"legacy","peer_port":42058,"connected_at":1,"client_properties":{"connection_name":"predecessor"}}]`))
		case strings.HasPrefix(r.URL.Path, "/api/"):
			_, _ = w.Write([]byte(`[]`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(mgmt.Close)
	counts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(report.Counts{Connections: []report.Connection{{At: time.Now(), LocalPort: 42058}}})
	}))
	t.Cleanup(counts.Close)
	client, err := rabbithole.NewClient(mgmt.URL, "admin", "admin")
	if err != nil {
		t.Fatal(err)
	}
	w := Witness{Management: client, Counts: counts.URL, User: "legacy-app", Vhost: "legacy",
		Events: func(context.Context) ([]AMQPEvent, error) { return nil, nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Connections) != 1 || !strings.Contains(s.Connections[0], "peer_port=42058") {
		t.Fatalf("expected the snapshot to list the stand-in's connection, got %q after %d listings", s.Connections, listings.Load())
	}
}
