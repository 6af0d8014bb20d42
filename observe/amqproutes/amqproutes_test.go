package amqproutes

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

func sample(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Every user the broker is given but the controller's two is a principal
// tried, in the virtual host amqpdefs grants it.
func TestPrincipalsAreTheBrokersUsers(t *testing.T) {
	m := sample(t)
	ps := Principals(m)
	var users []string
	for _, p := range ps {
		users = append(users, p.User)
		want := wire.AMQPVhost
		if slices.Contains(amqpdefs.ControlUsers(m), p.User) {
			want = wire.AMQPControlVhost
		}
		if p.Vhost != want {
			t.Errorf("%s: vhost %s, expected %s", p.User, p.Vhost, want)
		}
	}
	var want []string
	for _, u := range slices.Concat(amqpdefs.Users(m), amqpdefs.ControlUsers(m)) {
		if u != wire.ControllerUser && u != wire.ControllerMeshUser {
			want = append(want, u)
		}
	}
	slices.Sort(users)
	slices.Sort(want)
	if !slices.Equal(users, want) {
		t.Errorf("principals %v, expected %v", users, want)
	}
	for user, serves := range map[string]bool{
		wire.AMQPUser("node-a", "sensor"): true, wire.AMQPUser("node-a", "mesh-catalog"): true, wire.AMQPUser("node-b", "logger"): false,
	} {
		if p, _ := Find(ps, user); p.Serves != serves {
			t.Errorf("%s serves: %v, expected %v", user, p.Serves, serves)
		}
	}
}

// A principal's own keys lead to queues of the plane as amqpdefs declares
// it, and its own queues are in it: the rightful route is observable.
func TestOwnKeysAndQueuesAreThePlanes(t *testing.T) {
	m := sample(t)
	hashes := map[string]string{}
	for _, u := range slices.Concat(amqpdefs.Users(m), amqpdefs.ControlUsers(m)) {
		hashes[u] = "hash-of-" + u
	}
	d, err := amqpdefs.Build(m, amqpdefs.Inputs{Hashes: hashes})
	if err != nil {
		t.Fatal(err)
	}
	var queues []string
	for _, q := range d.Queues {
		if q.Vhost == wire.AMQPControlVhost {
			queues = append(queues, q.Name)
		}
	}
	for _, p := range Principals(m) {
		for _, k := range p.Keys {
			q, err := wire.KeyQueue(k)
			if err != nil || !slices.Contains(queues, q) {
				t.Errorf("%s's key %s: queue %q (%v), not one of the plane's", p.User, k, q, err)
			}
		}
		for _, q := range p.Queues {
			if !slices.Contains(queues, q) {
				t.Errorf("%s's queue %s is not one of the plane's", p.User, q)
			}
		}
	}
}

func TestOutcomeAsTheFeatureWritesIt(t *testing.T) {
	for o, want := range map[Outcome]string{
		Refused: "refused 403 ACCESS_REFUSED", NotAllowed: "refused 530 NOT_ALLOWED", ForgedUserID: "refused 406 PRECONDITION_FAILED",
		Unroutable: "taken, returned 312 NO_ROUTE", Taken: "taken", {Nacked: true}: "nacked", Allowed: "allowed",
	} {
		if got := o.String(); got != want {
			t.Errorf("%#v: %q, expected %q", o, got, want)
		}
	}
	a := Attempt{User: "u", Kind: KindHost, Route: RouteGet, Target: "q", Want: Refused, Got: Allowed}
	if err := a.Err(); err == nil || err.Error() != `u (host): get from a queue not its own "q": expected refused 403 ACCESS_REFUSED, got allowed` {
		t.Errorf("Err: %v", err)
	}
	a.Got = Refused
	if a.Err() != nil || len(Failures([]Attempt{a})) != 0 {
		t.Error("an attempt answered as expected is reported failed")
	}
}
