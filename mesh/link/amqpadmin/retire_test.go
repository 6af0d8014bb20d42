package amqpadmin_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/link/amqpadmin"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestRetireRemovesTheMeshsSideAndNothingElse: the broker as the mesh
// minted it, a user the mesh made and no longer names (a spent token's,
// granted in the control plane's virtual host alone), a user of someone
// else's granted in the mesh's virtual host and in another, and a
// virtual host of someone else's. Retire removes the mesh's two virtual
// hosts and every user granted in them alone, the stray one too; the
// other user, its other virtual host and the administrator stay. Run
// again, it removes nothing more and says so.
func TestRetireRemovesTheMeshsSideAndNothingElse(t *testing.T) {
	if testing.Short() {
		t.Skip("RabbitMQ container tests are skipped in -short mode")
	}
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	br := amqptest.Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := br.ManagementURL(ctx, t)
	admin, err := amqpadmin.Dial(ctx, url, br.Container.AdminUsername, br.Container.AdminPassword)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := rabbithole.NewClient(url, br.Container.AdminUsername, br.Container.AdminPassword)
	if err != nil {
		t.Fatal(err)
	}
	const stray, other, otherVhost = "enrol.tok-spent", "legacy-ops", "legacy-ops-vhost"
	grant := rabbithole.Permissions{Configure: "^x$", Write: "^x$", Read: "^x$"}
	if _, err := obs.PutVhost(otherVhost, rabbithole.VhostSettings{}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{stray, other} {
		if _, err := obs.PutUser(u, rabbithole.UserSettings{Password: "p", Tags: rabbithole.UserTags{}}); err != nil {
			t.Fatal(err)
		}
	}
	for vhost, user := range map[string]string{wire.AMQPControlVhost: stray, wire.AMQPVhost: other, otherVhost: other} {
		if _, err := obs.UpdatePermissionsIn(vhost, user, grant); err != nil {
			t.Fatal(err)
		}
	}
	var minted []string
	for _, u := range br.Definitions.Users {
		if u.Name != br.Container.AdminUsername {
			minted = append(minted, u.Name)
		}
	}

	changes, err := admin.Retire(ctx, []string{wire.AMQPVhost, wire.AMQPControlVhost}, nil)
	if err != nil {
		t.Fatalf("retire: %v", err)
	}
	users, err := obs.ListUsers()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, u := range users {
		left = append(left, u.Name)
	}
	for _, gone := range append(minted, stray) {
		if slices.Contains(left, gone) {
			t.Errorf("expected %s removed (granted in the mesh's virtual hosts alone), the broker keeps it", gone)
		}
	}
	for _, kept := range []string{other, br.Container.AdminUsername} {
		if !slices.Contains(left, kept) {
			t.Errorf("expected %s kept, it is gone (changes: %s)", kept, changes)
		}
	}
	vhosts, err := obs.ListVhosts()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vhosts {
		names = append(names, v.Name)
	}
	if slices.Contains(names, wire.AMQPVhost) || slices.Contains(names, wire.AMQPControlVhost) || !slices.Contains(names, otherVhost) {
		t.Errorf("expected the mesh's virtual hosts gone and %s kept, the broker has %v", otherVhost, names)
	}
	if again, err := admin.Retire(ctx, []string{wire.AMQPVhost, wire.AMQPControlVhost}, minted); err != nil || len(again) != 0 {
		t.Fatalf("expected a second retirement to remove nothing, got %s, %v", again, err)
	}
}
