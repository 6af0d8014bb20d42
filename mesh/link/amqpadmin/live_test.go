package amqpadmin_test

import (
	"context"
	"errors"
	"net"
	neturl "net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	"github.com/moby/moby/client"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpadmin"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// live is one broker shared by the subtests of TestLiveChanges, which
// run in order: each starts by applying the mesh as minted.
type live struct {
	br       *amqptest.Broker
	admin    *amqpadmin.Admin
	observer *rabbithole.Client // the administrator's, to read the broker
	m        *meshdesc.Mesh
	base     amqpdefs.Definitions
	hashes   map[string]string
}

// A foreign user: made by the test, not the mesh's; it holds grants in
// the mesh's virtual host too, which no Apply may clear.
const foreign = "predecessor.app"

func TestLiveChanges(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	br := amqptest.Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	obs.SetTimeout(10 * time.Second)
	l := &live{br: br, admin: admin, observer: obs, m: m, base: br.Definitions, hashes: map[string]string{}}
	for _, u := range br.Definitions.Users {
		l.hashes[u.Name] = u.PasswordHash
	}

	// The foreign user, with grants in "/" and in the mesh's virtual host.
	if _, err := obs.PutUser(foreign, rabbithole.UserSettings{Password: "theirs", Tags: rabbithole.UserTags{"management"}}); err != nil {
		t.Fatal(err)
	}
	for _, vh := range []string{"/", wire.AMQPVhost} {
		if _, err := obs.UpdatePermissionsIn(vh, foreign, rabbithole.Permissions{Configure: "^x$", Write: "^x$", Read: "^x$"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := obs.UpdateTopicPermissionsIn(wire.AMQPVhost, foreign, rabbithole.TopicPermissions{Exchange: wire.ExchangeEvents, Write: "^x$", Read: "^x$"}); err != nil {
		t.Fatal(err)
	}
	before := l.snapshotUser(t, foreign)
	adminBefore := l.snapshotUser(t, br.Container.AdminUsername)

	// The broker was loaded from the same definitions: nothing to do.
	if ch, err := admin.Apply(ctx, l.base); err != nil || len(ch) != 0 {
		t.Fatalf("expected the minted broker already as desired, got %v, %v", ch, err)
	}

	t.Run("enrolment", l.enrolment)
	t.Run("revoke", l.revoke)
	t.Run("narrow", l.narrow)
	t.Run("foreign name", l.foreignName)
	t.Run("refused", l.refused)

	// The foreign user and the administrator survived every Apply.
	if got := l.snapshotUser(t, foreign); !slices.Equal(got, before) {
		t.Errorf("expected the foreign user untouched:\nbefore %v\nafter  %v", before, got)
	}
	if got := l.snapshotUser(t, br.Container.AdminUsername); !slices.Equal(got, adminBefore) {
		t.Errorf("expected the administrator untouched:\nbefore %v\nafter  %v", adminBefore, got)
	}

	// Last: it freezes the broker.
	t.Run("paused", l.paused)
}

// desired is the definitions the controller derives from m with the
// minted hashes, and extra ones for new users.
func (l *live) desired(t *testing.T, m *meshdesc.Mesh, extra map[string]string) amqpdefs.Definitions {
	t.Helper()
	h := map[string]string{}
	for k, v := range l.hashes {
		h[k] = v
	}
	for k, v := range extra {
		h[k] = v
	}
	d, err := amqpdefs.Build(m, amqpdefs.Inputs{Hashes: h})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// reset brings the broker back to the mesh as minted.
func (l *live) reset(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := l.admin.Apply(ctx, l.base); err != nil {
		t.Fatalf("reset: %v", err)
	}
}

// An enrolment: the token is spent, the node joins. The new host logs in
// and uses its grants; the token's user is gone; another principal's
// connection and consumer go on as they were.
func (l *live) enrolment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l.reset(ctx, t)

	// Another principal, consuming: the host of node-a on its queue.
	other := l.br.Dial(t, wire.HostUser("node-a"))
	och, err := other.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := och.Consume(wire.NodeQueue("node-a"), "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := l.connection(ctx, t, wire.HostUser("node-a"))
	controller := l.confirming(t, l.br.Dial(t, wire.ControllerUser))
	l.declare(ctx, t, controller, deliveries, "before")

	m := *l.m
	m.Nodes = append(slices.Clone(m.Nodes), meshdesc.Node{Name: "node-c"})
	m.Tokens = nil
	const password = "node-c's password"
	hash, err := amqpdefs.NewPasswordHash(password)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := l.admin.Apply(ctx, l.desired(t, &m, map[string]string{wire.HostUser("node-c"): hash}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.User != wire.HostUser("node-c") && c.User != wire.EnrolUser("tok-node-c") && !strings.Contains(c.Queue, "node-c") {
			t.Errorf("expected changes to node-c's host, its queues and the token alone, got %v", c)
		}
	}
	if !slices.Contains(changes, amqpadmin.Change{Kind: amqpadmin.QueueDeclared, Vhost: wire.AMQPControlVhost, Queue: wire.NodeQueue("node-c")}) {
		t.Errorf("expected node-c's declaration queue declared before its host is let in, got %v", changes)
	}
	if !slices.Contains(changes, amqpadmin.Change{Kind: amqpadmin.UserCreated, User: wire.HostUser("node-c")}) ||
		!slices.Contains(changes, amqpadmin.Change{Kind: amqpadmin.UserDeleted, User: wire.EnrolUser("tok-node-c")}) {
		t.Errorf("expected node-c's host created and the token's user deleted, got %v", changes)
	}
	again, err := l.admin.Apply(ctx, l.desired(t, &m, map[string]string{wire.HostUser("node-c"): hash}))
	if err != nil || len(again) != 0 {
		t.Errorf("expected a second Apply to change nothing, got %v, %v", again, err)
	}

	// The new host logs in and reports as itself, and as no one else.
	conn, err := amqp.DialConfig(wire.AMQPControlURL(wire.HostUser("node-c"), password, l.br.Addr()),
		amqp.Config{TLSClientConfig: link.PinnedTLS(l.br.Fingerprint, "127.0.0.1")})
	if err != nil {
		t.Fatalf("expected node-c's host to log in: %v", err)
	}
	defer conn.Close()
	ch := l.confirming(t, conn)
	if err := publish(ctx, ch, wire.ExchangeControl, wire.NodeReport("node-c")); err != nil {
		t.Errorf("expected node-c's report accepted: %v", err)
	}
	if err := publish(ctx, ch, wire.ExchangeControl, wire.NodeReport("node-a")); !refused(err) {
		t.Errorf("expected node-c's host refused node-a's report (403), got %v", err)
	}

	// The other principal noticed nothing: same connection, still served.
	if now := l.connection(ctx, t, wire.HostUser("node-a")); now != seen {
		t.Errorf("expected node-a's host on the same connection %v, now %v", seen, now)
	}
	l.declare(ctx, t, controller, deliveries, "after")
}

// A person revoked: refused at login, and the open connection closed by
// the broker; the other person's is left alone.
func (l *live) revoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l.reset(ctx, t)
	alice := l.br.Dial(t, wire.PersonUser("alice"))
	closed := alice.NotifyClose(make(chan *amqp.Error, 1))
	l.br.Dial(t, wire.PersonUser("bob"))
	bob := l.connection(ctx, t, wire.PersonUser("bob"))

	m := *l.m
	m.Persons = slices.DeleteFunc(slices.Clone(m.Persons), func(p meshdesc.Person) bool { return p.Name == "alice" })
	changes, err := l.admin.Apply(ctx, l.desired(t, &m, nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := (amqpadmin.Changes{{Kind: amqpadmin.UserDeleted, User: wire.PersonUser("alice")}}); !slices.Equal(changes, want) {
		t.Errorf("expected %v, got %v", want, changes)
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced {
			t.Errorf("expected alice's connection forced closed (320), got %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("expected the broker to close alice's connection within 10 s")
	}
	cred := l.br.Creds[wire.PersonUser("alice")]
	if c, err := amqp.DialConfig(cred.URL, amqp.Config{TLSClientConfig: link.PinnedTLS(cred.Fingerprint, cred.Host())}); !refused(err) {
		if c != nil {
			c.Close()
		}
		t.Errorf("expected alice refused at login (403), got %v", err)
	}
	if now := l.connection(ctx, t, wire.PersonUser("bob")); now != bob {
		t.Errorf("expected bob on the same connection %v, now %v", bob, now)
	}
}

// A grant narrowed: bob loses every tool but calibrate. A channel that
// has called a tool goes on being allowed it by RabbitMQ (each channel
// caches what it was allowed), so Apply closes bob's connections; once
// back, his call of the lost tool is refused. Alice, whose grant widens
// in the same Apply, stays connected and may call her new tool at once.
func (l *live) narrow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l.reset(ctx, t)
	catalog := wire.ServiceQueue("mesh-catalog", "catalog_tools")
	calibrate := wire.ServiceQueue("sensor", "calibrate")
	bob := l.br.Dial(t, wire.PersonUser("bob"))
	closed := bob.NotifyClose(make(chan *amqp.Error, 1))
	if err := publish(ctx, l.confirming(t, bob), wire.ExchangeRPC, catalog); err != nil {
		t.Fatalf("expected bob's call accepted before: %v", err)
	}
	alice := l.br.Dial(t, wire.PersonUser("alice"))
	aliceCh := l.confirming(t, alice)
	if err := publish(ctx, aliceCh, wire.ExchangeRPC, calibrate); err != nil {
		t.Fatalf("expected alice's call accepted before: %v", err)
	}
	aliceSeen := l.connection(ctx, t, wire.PersonUser("alice"))
	l.connection(ctx, t, wire.PersonUser("bob")) // listed, so closed below

	m := *l.m
	m.Persons = []meshdesc.Person{
		{Name: "alice", Tools: []string{"sensor.calibrate", "mesh-catalog.catalog_tools"}},
		{Name: "bob", Tools: []string{"sensor.calibrate"}},
	}
	changes, err := l.admin.Apply(ctx, l.desired(t, &m, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := amqpadmin.Changes{
		{Kind: amqpadmin.TopicPermissionSet, User: wire.PersonUser("alice"), Vhost: wire.AMQPVhost, Exchange: wire.ExchangeRPC},
		{Kind: amqpadmin.TopicPermissionSet, User: wire.PersonUser("bob"), Vhost: wire.AMQPVhost, Exchange: wire.ExchangeRPC},
		{Kind: amqpadmin.ConnectionsClosed, User: wire.PersonUser("bob"), Connections: 1},
	}
	if !slices.Equal(changes, want) {
		t.Errorf("expected %v, got %v", want, changes)
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced {
			t.Errorf("expected bob's connection forced closed (320), got %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("expected bob's connection closed within 10 s")
	}
	bob = l.br.Dial(t, wire.PersonUser("bob"))
	if err := publish(ctx, l.confirming(t, bob), wire.ExchangeRPC, catalog); !refused(err) {
		t.Errorf("expected bob's call of catalog_tools refused (403), got %v", err)
	}
	if err := publish(ctx, l.confirming(t, bob), wire.ExchangeRPC, calibrate); err != nil {
		t.Errorf("expected bob's call of calibrate still accepted: %v", err)
	}
	if err := publish(ctx, aliceCh, wire.ExchangeRPC, catalog); err != nil {
		t.Errorf("expected alice's new tool allowed on her open channel: %v", err)
	}
	if now := l.connection(ctx, t, wire.PersonUser("alice")); now != aliceSeen {
		t.Errorf("expected alice on the same connection %v, now %v", aliceSeen, now)
	}
}

// A desired user whose name a foreign user holds is refused, and nothing
// changes.
func (l *live) foreignName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l.reset(ctx, t)
	d := l.base
	d.Users = append(slices.Clone(d.Users), amqpdefs.User{Name: foreign, PasswordHash: l.hashes[wire.ControllerUser], HashingAlgorithm: amqpdefs.HashingAlgorithm, Tags: wire.AMQPOwnerTag})
	changes, err := l.admin.Apply(ctx, d)
	if !errors.Is(err, amqpadmin.ErrForeignUser) || len(changes) != 0 {
		t.Errorf("expected ErrForeignUser and no change, got %v, %v", changes, err)
	}
}

// An administrator refused, or a principal of the mesh posing as one.
func (l *live) refused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := l.br.ManagementURL(ctx, t)
	if _, err := amqpadmin.Dial(ctx, url, l.br.Container.AdminUsername, "wrong"); !errors.Is(err, amqpadmin.ErrRefused) {
		t.Errorf("expected a wrong password refused, got %v", err)
	}
	if _, err := amqpadmin.Dial(ctx, url, foreign, "theirs"); !errors.Is(err, amqpadmin.ErrRefused) {
		t.Errorf("expected a user without the administrator tag refused, got %v", err)
	}
	// Every principal of the mesh: its tag opens no management access.
	for _, user := range []string{wire.ControllerUser, wire.HostUser("node-a"), wire.PersonUser("bob")} {
		u, err := neturl.Parse(l.br.Creds[user].URL)
		if err != nil {
			t.Fatal(err)
		}
		pw, _ := u.User.Password()
		if _, err := amqpadmin.Dial(ctx, url, user, pw); !errors.Is(err, amqpadmin.ErrRefused) {
			t.Errorf("expected %s refused by the management API, got %v", user, err)
		}
	}
}

// A management API that does not answer: an error within the context's
// deadline, from a listener that never answers and from a frozen broker.
func (l *live) paused(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	within(t, 2*time.Second, func(ctx context.Context) error {
		_, err := amqpadmin.Dial(ctx, "http://"+silent.Addr().String(), "guest", "guest")
		return err
	})

	docker := testutil.DockerClient(t)
	id := l.br.Container.GetContainerID()
	bg := context.Background()
	if _, err := docker.Client.ContainerPause(bg, id, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := docker.Client.ContainerUnpause(bg, id, client.ContainerUnpauseOptions{}); err != nil {
			t.Errorf("unpause the broker: %v", err)
		}
	}()
	within(t, 2*time.Second, func(ctx context.Context) error {
		_, err := l.admin.Apply(ctx, l.base)
		return err
	})
}

// within runs f with a context of timeout and expects ErrUnavailable no
// later than a second after it.
func within(t *testing.T, timeout time.Duration, f func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	took := time.Since(start)
	if !errors.Is(err, amqpadmin.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expected ErrUnavailable for the deadline, got %v", err)
	}
	if took > timeout+time.Second {
		t.Errorf("expected the error within %v, took %v", timeout, took)
	}
}

// conn is what the broker says of one connection: a reconnect shows as
// another name or connected_at.
type conn struct {
	name        string
	connectedAt uint64
}

// connection is user's one connection as the broker lists it, polled
// until the management API knows of it.
func (l *live) connection(ctx context.Context, t *testing.T, user string) conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var found []conn
		list, err := l.observer.ListConnections()
		for _, c := range list {
			if c.User == user {
				found = append(found, conn{c.Name, c.ConnectedAt})
			}
		}
		if err == nil && len(found) == 1 && found[0].connectedAt != 0 {
			return found[0]
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("expected one connection of %s listed, got %v (%v)", user, found, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snapshotUser is what the broker holds of user: tags, hash, grants.
func (l *live) snapshotUser(t *testing.T, user string) []string {
	t.Helper()
	u, err := l.observer.GetUser(user)
	if err != nil {
		t.Fatalf("get %s: %v", user, err)
	}
	out := []string{u.PasswordHash, string(u.HashingAlgorithm)}
	out = append(out, u.Tags...)
	perms, err := l.observer.ListPermissionsOf(user)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range perms {
		out = append(out, p.Vhost+" "+p.Configure+" "+p.Write+" "+p.Read)
	}
	topics, err := l.observer.ListTopicPermissionsOf(user)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range topics {
		out = append(out, p.Vhost+" "+p.Exchange+" "+p.Write+" "+p.Read)
	}
	slices.Sort(out)
	return out
}

// confirming opens a channel in confirm mode on conn.
func (l *live) confirming(t *testing.T, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return ch
}

// declare publishes a declaration for node-a as the controller and
// expects the consumer of node-a's queue to receive it.
func (l *live) declare(ctx context.Context, t *testing.T, controller *amqp.Channel, deliveries <-chan amqp.Delivery, body string) {
	t.Helper()
	dc, err := controller.PublishWithDeferredConfirmWithContext(ctx, wire.ExchangeControl, wire.NodeDeclare("node-a"), true, false, amqp.Publishing{Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("expected the declaration confirmed, got %v, %v", ok, err)
	}
	select {
	case d, ok := <-deliveries:
		if !ok || string(d.Body) != body {
			t.Fatalf("expected node-a's host to receive %q, got %q (open %v)", body, d.Body, ok)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("expected node-a's host to receive %q within 10 s", body)
	}
}

// publish sends one message with a confirm and returns the broker's
// refusal, if any: a refused publish closes the channel.
func publish(ctx context.Context, ch *amqp.Channel, exchange, key string) error {
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, amqp.Publishing{Body: []byte("x")})
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	if ok && err == nil {
		return nil
	}
	select {
	case e := <-closed:
		if e != nil {
			return e
		}
	case <-time.After(5 * time.Second):
	}
	if err != nil {
		return err
	}
	return errors.New("publish nacked")
}

// refused is a 403 ACCESS_REFUSED from the broker.
func refused(err error) bool {
	var e *amqp.Error
	return errors.As(err, &e) && e.Code == amqp.AccessRefused
}
