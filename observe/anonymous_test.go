package observe

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestDialAnonymous: the composed configuration refuses a client without
// a user; the same server reloaded on the file cut after its jetstream
// block (issue 7 §2: no accounts, so no users) lets it in. So a bed that
// sees the refusal has seen a closed bus.
func TestDialAnonymous(t *testing.T) {
	s := startMesh(t, "mesh.yaml")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	_, err := DialAnonymous(ctx, s.Fingerprint, "localhost", s.Addr())
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("expected the composed configuration to refuse a client without a user, got %v", err)
	}

	whole, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	torn := whole[:strings.Index(string(whole), `"accounts"`)]
	if err := os.WriteFile(s.ConfigPath, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("expected nats-server to reload to the torn file (the hole the entrypoint closes), got %v", err)
	}
	nc, err := DialAnonymous(ctx, s.Fingerprint, "localhost", s.Addr())
	if err != nil {
		t.Fatalf("expected the torn configuration to let a client without a user in, got %v", err)
	}
	nc.Close()
}
