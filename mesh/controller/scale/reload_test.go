package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/internal/natstest"
)

// BenchmarkReload measures what one configuration reload costs the server
// with K clients connected, each its own user with a bcrypt hash of the
// given cost: nats-server checks every connected client's password again
// on a reload (docs/decisions/0004-bcrypt-cost.md).
//
//	go test -run X -bench Reload -benchtime 5x ./mesh/controller/scale
func BenchmarkReload(b *testing.B) {
	for _, clients := range []int{50, 200} {
		for _, cost := range []int{bcrypt.MinCost, bcrypt.DefaultCost} {
			b.Run(fmt.Sprintf("clients=%d/cost=%d", clients, cost), func(b *testing.B) {
				srv := reloadServer(b, clients, cost)
				b.ResetTimer()
				for range b.N {
					if err := srv.Reload(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// reloadServer starts a server whose configuration has n users hashed at
// cost, with each of them connected.
func reloadServer(b *testing.B, n, cost int) *server.Server {
	b.Helper()
	type user struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	users := make([]user, n)
	for i := range users {
		h, err := bcrypt.GenerateFromPassword([]byte("pw-"+strconv.Itoa(i)), cost)
		if err != nil {
			b.Fatal(err)
		}
		users[i] = user{fmt.Sprintf("u%d", i), string(h)}
	}
	conf, err := json.Marshal(map[string]any{"listen": "127.0.0.1:-1", "accounts": map[string]any{"A": map[string]any{"users": users}}})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "nats.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		b.Fatal(err)
	}
	srv := natstest.ServeFile(b, path)
	for i := range n {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(fmt.Sprintf("u%d", i), "pw-"+strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
	}
	return srv
}
