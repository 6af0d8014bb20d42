package rollout_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestTheCompatibilityBrokerRetiresAfterNobodyWasConnectedForItsPeriod:
// the controller records who of the predecessor's users the broker lists
// connected, and since when nobody; retirable once nobody has been for
// the description's retire_after, not before, and not once someone is
// back.
func TestTheCompatibilityBrokerRetiresAfterNobodyWasConnectedForItsPeriod(t *testing.T) {
	ctx := controllertest.Ctx(t)
	m := amqpMesh(t)
	mod, ok := m.CompatBroker()
	if !ok || mod.Compat.RetireAfterDuration() != 10*time.Minute {
		t.Fatalf("expected the sample's compatibility broker, retirable after 10m, got %+v", mod)
	}
	dir := filepath.Join(t.TempDir(), "state")
	st := store.FileStore(dir)
	if _, err := rollout.Genesis(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var connected map[string]int
	var asked [][]string
	o := rollout.Options{Now: func() time.Time { return now }, AMQPClients: func(_ context.Context, endpoint, user, password string, users, vhosts []string) (map[string]int, error) {
		if user != wire.AMQPAdminUser || password == "" || endpoint != "http://rabbitmq:15672" {
			t.Errorf("expected the administrator at the description's management API, got %s at %s", user, endpoint)
		}
		asked = append(asked, append(append([]string(nil), users...), vhosts...))
		return connected, nil
	}}
	look := func(at time.Time, who map[string]int) store.Compat {
		t.Helper()
		now, connected = at, who
		if err := rollout.ObserveCompat(ctx, m, st, o); err != nil {
			t.Fatal(err)
		}
		c, err := st.Compat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := look(now, map[string]int{"legacy-app": 1})
	if !c.IdleSince.IsZero() || c.Retirable() || c.Connected["legacy-app"] != 1 || c.Module != "amqp-compat" {
		t.Fatalf("with the predecessor connected: %+v", c)
	}
	if len(asked[0]) != 2 || asked[0][0] != "legacy-app" || asked[0][1] != "legacy" {
		t.Errorf("expected the broker asked of the predecessor's user and virtual host, got %v", asked[0])
	}
	gone := now.Add(time.Minute)
	if c = look(gone, map[string]int{}); !c.IdleSince.Equal(gone) || c.Retirable() {
		t.Fatalf("nobody, just now: %+v", c)
	}
	if c = look(gone.Add(9*time.Minute), map[string]int{}); !c.IdleSince.Equal(gone) || c.Retirable() {
		t.Fatalf("nobody for 9m: %+v", c)
	}
	if c = look(gone.Add(10*time.Minute), map[string]int{}); !c.Retirable() {
		t.Fatalf("nobody for 10m: expected retirable, got %+v", c)
	}
	if c = look(gone.Add(11*time.Minute), map[string]int{"legacy-app": 2}); c.Retirable() || !c.IdleSince.IsZero() {
		t.Fatalf("someone back: %+v", c)
	}
}
