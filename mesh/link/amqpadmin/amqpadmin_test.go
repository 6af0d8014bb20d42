package amqpadmin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/wire"
)

// fakeAPI answers the management API's calls Apply makes from fixed
// lists, fails the writes named in fail, and records every write.
type fakeAPI struct {
	mu     sync.Mutex
	whoami string
	users  string
	// queues and bindings list what the virtual host mesh holds; none
	// when empty.
	queues, bindings string
	fail             map[string]bool // "PUT /api/users/x"
	writes           []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "secret" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	call := r.Method + " " + r.URL.EscapedPath()
	if r.Method == http.MethodGet {
		body := map[string]string{
			"/api/whoami":             f.whoami,
			"/api/vhosts":             `[{"name":"mesh"}]`,
			"/api/users/":             f.users,
			"/api/permissions/":       `[]`,
			"/api/topic-permissions/": `[]`,
			"/api/connections":        `[]`,
			"/api/exchanges/mesh":     `[{"name":"mesh.events","vhost":"mesh","type":"topic"}]`,
			"/api/queues/mesh":        cmp.Or(f.queues, `[]`),
			"/api/bindings/mesh":      cmp.Or(f.bindings, `[]`),
		}[r.URL.Path]
		if body == "" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(body))
		return
	}
	f.mu.Lock()
	f.writes = append(f.writes, call)
	f.mu.Unlock()
	if f.fail[call] {
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "boom", "reason": "test"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func serve(t *testing.T, f *fakeAPI) string {
	t.Helper()
	if f.whoami == "" {
		f.whoami = `{"name":"admin","tags":["administrator"]}`
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

func desired(users ...string) amqpdefs.Definitions {
	d := amqpdefs.Definitions{Vhosts: []amqpdefs.Vhost{{Name: "mesh"}}}
	for _, u := range users {
		d.Users = append(d.Users, amqpdefs.User{Name: u, PasswordHash: "h-" + u, HashingAlgorithm: amqpdefs.HashingAlgorithm, Tags: wire.AMQPOwnerTag})
		d.Permissions = append(d.Permissions, amqpdefs.Permission{User: u, Vhost: "mesh", Configure: "^$", Write: "^$", Read: "^$"})
	}
	return d
}

// A call that fails midway: the changes made before it are returned with
// the error, which names the change that failed; the foreign user and the
// administrator are never written.
func TestApplyReturnsWhatWasDoneBeforeAnError(t *testing.T) {
	f := &fakeAPI{
		users: `[{"name":"admin","tags":["administrator","mesh"]},{"name":"theirs","tags":[]},` +
			`{"name":"gone","password_hash":"x","hashing_algorithm":"rabbit_password_hashing_sha256","tags":["mesh"]}]`,
		fail: map[string]bool{"PUT /api/permissions/mesh/b": true},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := Dial(ctx, serve(t, f), "admin", "secret")
	if err != nil {
		t.Fatal(err)
	}
	changes, err := a.Apply(ctx, desired("a", "b"))
	if err == nil || !strings.Contains(err.Error(), "permission set b in mesh") {
		t.Fatalf("expected the failed change named, got %v", err)
	}
	want := Changes{{Kind: UserCreated, User: "a"}, {Kind: UserCreated, User: "b"}, {Kind: PermissionSet, User: "a", Vhost: "mesh"}}
	if !slices.Equal(changes, want) {
		t.Errorf("expected %v, got %v", want, changes)
	}
	for _, w := range f.writes {
		if strings.Contains(w, "/admin") || strings.Contains(w, "/theirs") || strings.Contains(w, "/gone") {
			t.Errorf("expected no write to the administrator, a foreign user, or past the failure, got %s", w)
		}
	}
}

// What a composition adds to the topology (a token's answer queue, and
// its binding here) is declared before any user is let in; what exists is
// not declared again, nor an exchange the broker has.
func TestApplyDeclaresWhatIsMissing(t *testing.T) {
	f := &fakeAPI{users: `[]`, queues: `[{"name":"old","vhost":"mesh"}]`,
		bindings: `[{"source":"mesh.events","vhost":"mesh","destination":"old","destination_type":"queue","routing_key":"k"}]`}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := Dial(ctx, serve(t, f), "admin", "secret")
	if err != nil {
		t.Fatal(err)
	}
	d := desired("a")
	d.Exchanges = []amqpdefs.Exchange{{Name: "mesh.events", Vhost: "mesh", Type: "topic", Durable: true}}
	d.Queues = []amqpdefs.Queue{{Name: "old", Vhost: "mesh", Durable: true}, {Name: "enrol.t1", Vhost: "mesh", Durable: true, Arguments: map[string]any{"x-expires": 1000}}}
	d.Bindings = []amqpdefs.Binding{
		{Source: "mesh.events", Vhost: "mesh", Destination: "old", DestinationType: "queue", RoutingKey: "k"},
		{Source: "mesh.events", Vhost: "mesh", Destination: "enrol.t1", DestinationType: "queue", RoutingKey: "t1"},
	}
	changes, err := a.Apply(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	want := Changes{
		{Kind: QueueDeclared, Vhost: "mesh", Queue: "enrol.t1"},
		{Kind: BindingDeclared, Vhost: "mesh", Exchange: "mesh.events", Queue: "enrol.t1", Key: "t1"},
		{Kind: UserCreated, User: "a"},
		{Kind: PermissionSet, User: "a", Vhost: "mesh"},
	}
	if !slices.Equal(changes, want) {
		t.Fatalf("expected %v, got %v", want, changes)
	}
	if !slices.Contains(f.writes, "PUT /api/queues/mesh/enrol.t1") || slices.Contains(f.writes, "PUT /api/queues/mesh/old") {
		t.Fatalf("expected the missing queue declared and the existing one not, got %v", f.writes)
	}
}

// The mesh's user no longer desired is deleted; the foreign one and the
// administrator (even tagged as the mesh's) are not.
func TestApplyDeletesOnlyTheMeshsUsers(t *testing.T) {
	f := &fakeAPI{users: `[{"name":"admin","tags":["administrator","mesh"]},{"name":"theirs","tags":["management"]},` +
		`{"name":"gone","password_hash":"x","hashing_algorithm":"rabbit_password_hashing_sha256","tags":"mesh"}]`}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := Dial(ctx, serve(t, f), "admin", "secret")
	if err != nil {
		t.Fatal(err)
	}
	changes, err := a.Apply(ctx, amqpdefs.Definitions{Vhosts: []amqpdefs.Vhost{{Name: "mesh"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Changes{{Kind: UserDeleted, User: "gone"}}); !slices.Equal(changes, want) {
		t.Errorf("expected %v, got %v", want, changes)
	}
	if want := []string{"DELETE /api/users/gone"}; !slices.Equal(f.writes, want) {
		t.Errorf("expected writes %v, got %v", want, f.writes)
	}
}

func TestApplyRefusesWhatItMustNotTouch(t *testing.T) {
	f := &fakeAPI{users: `[{"name":"admin","tags":["administrator"]},{"name":"theirs","tags":[]}]`}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := Dial(ctx, serve(t, f), "admin", "secret")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, desired("a", "theirs")); !errors.Is(err, ErrForeignUser) || !strings.Contains(err.Error(), "theirs") {
		t.Errorf("expected ErrForeignUser naming theirs, got %v", err)
	}
	if _, err := a.Apply(ctx, desired("admin")); !errors.Is(err, ErrInvalid) {
		t.Errorf("expected the administrator refused as a desired user, got %v", err)
	}
	d := desired("a")
	d.Permissions[0].Vhost = "elsewhere"
	if _, err := a.Apply(ctx, d); !errors.Is(err, ErrInvalid) {
		t.Errorf("expected a grant outside the desired vhosts refused, got %v", err)
	}
	if len(f.writes) != 0 {
		t.Errorf("expected nothing written, got %v", f.writes)
	}
}

func TestDialRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := serve(t, &fakeAPI{})
	// Each refusal names the API's address and the user, never the
	// password.
	named := func(what string, err error, password string) {
		t.Helper()
		if !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), " as admin") || strings.Contains(err.Error(), password) {
			t.Errorf("%s: expected the error to name %s and the user admin and not the password, got %v", what, url, err)
		}
	}
	_, err := Dial(ctx, url, "admin", "wrong-pw-19")
	if !errors.Is(err, ErrRefused) {
		t.Errorf("expected a wrong password refused, got %v", err)
	}
	named("a wrong password", err, "wrong-pw-19")
	url = serve(t, &fakeAPI{whoami: `{"name":"admin","tags":["management"]}`})
	if _, err := Dial(ctx, url, "admin", "secret"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "administrator") {
		t.Errorf("expected a user without the administrator tag refused, got %v", err)
	}
	if _, err := Dial(ctx, "amqp://x:5672", "admin", "secret"); err == nil {
		t.Error("expected an amqp:// endpoint refused")
	}
	// Nothing listens: a server closed.
	srv := httptest.NewServer(&fakeAPI{})
	srv.Close()
	_, err = Dial(ctx, srv.URL, "admin", "secret")
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("expected ErrUnavailable where nothing listens, got %v", err)
	}
	url = srv.URL
	named("nothing listening", err, "secret")

	// An API that answered the dial and is gone by the apply: nothing is
	// changed, and the error names where it called.
	f := &fakeAPI{whoami: `{"name":"admin","tags":["administrator"]}`}
	srv = httptest.NewServer(f)
	a, err := Dial(ctx, srv.URL, "admin", "secret")
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	changes, err := a.Apply(ctx, desired("mod.node-a.sensor"))
	if !errors.Is(err, ErrUnavailable) || len(changes) != 0 || len(f.writes) != 0 {
		t.Errorf("expected ErrUnavailable and nothing changed, got %v, %v (writes %v)", changes, err, f.writes)
	}
	if err != nil && (!strings.Contains(err.Error(), srv.URL) || strings.Contains(err.Error(), "secret")) {
		t.Errorf("expected the error to name %s and not the password, got %v", srv.URL, err)
	}
}

func TestWidens(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{"^$", "^(a)$", true},
		{"^(a)$", "^(a)$", true},
		{`^(a\.b)$`, `^(a\.b|c)$`, true},
		{"^(a|c)$", "^(c|a|d)$", true},
		{"^(a|b)$", "^(a)$", false},
		{"^(a)$", "^$", false},
		{".*", "^(a)$", false},
		{"^(a)$", ".*", false}, // wider, but not provably so: closed
	} {
		if got := widens(c.from, c.to); got != c.want {
			t.Errorf("widens(%q, %q) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
