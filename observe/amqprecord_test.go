package observe

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/harness/rabbitmq"
	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestTheBrokersRecordHasEveryConnection: against RabbitMQ, the events the
// broker published since KeepEvents name a connection opened and closed,
// one refused at login, one still open, each by the name its client gave
// it (amqpconn's Name) and its user; a name never used is in none of them;
// and the record has every connection the broker lists open.
func TestTheBrokersRecordHasEveryConnection(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	br := amqptest.Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events, err := br.Container.KeepEvents(ctx, br.Container.AdminUsername, "test.connections", rabbitmq.ConnectionEventKeys...)
	if err != nil {
		t.Fatal(err)
	}

	user := wire.ModuleUser("node-a", "sensor")
	cred := br.Creds[user]
	dial := func(cred wire.Credential, name string) (*amqpconn.Conn, error) {
		return amqpconn.Dial(ctx, cred, amqpconn.Options{Name: name, Timeout: 30 * time.Second})
	}
	closed, err := dial(cred, "opened and closed")
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(time.Now().Add(5*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	wrong := cred
	u, err := url.Parse(cred.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, "not-its-password")
	wrong.URL = u.String()
	if c, err := dial(wrong, "refused"); err == nil {
		c.Close(time.Now().Add(5*time.Second), nil)
		t.Fatal("the broker let in a wrong password")
	}
	open, err := dial(cred, "still open")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(time.Now().Add(5*time.Second), nil)

	rec := settled(ctx, t, events, "refused")
	want := map[string]string{"opened and closed": "closed", "refused": "login refused: ", "still open": ""}
	for name, reason := range want {
		got := Named(rec.Connections, name)
		if len(got) != 1 || got[0].User != user || !strings.HasPrefix(got[0].Reason, reason) || (reason == "" && got[0].Reason != "") {
			t.Errorf("expected one connection named %q of %s, reason %q…; the record has %+v", name, user, reason, got)
		}
	}
	if got := Named(rec.Connections, "still open"); len(got) == 1 && got[0].TLSVersion == "" {
		t.Errorf("expected the connection over TLS to say its version, got %+v", got[0])
	}
	if got := Named(rec.Connections, "never made"); len(got) != 0 {
		t.Errorf("expected no connection named %q, the record has %+v", "never made", got)
	}

	out, err := br.Container.Ctl(ctx, append([]string{"list_connections", "-q", "--formatter", "json"}, AMQPConnectionsColumns...)...)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := AMQPConnections([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(Named(listed, "still open")) != 1 {
		t.Fatalf("expected the broker to list the connection still open, it lists %+v", listed)
	}
	if missing := NotRecorded(listed, rec); len(missing) != 0 {
		t.Errorf("expected the record to have every connection the broker lists open, it lacks %+v", missing)
	}
}

// settled reads the record until no login awaits its close and name is in
// it: the broker closes a refused login's connection, and names it, 3 s
// after refusing it.
func settled(ctx context.Context, t *testing.T, l *rabbitmq.EventLog, name string) AMQPRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		events, err := l.Events(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read := make([]AMQPEvent, len(events))
		for i, e := range events {
			read[i] = AMQPEvent(e)
		}
		rec, err := AMQPConnectionsEver(read)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Unsettled == 0 && len(Named(rec.Connections, name)) > 0 {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker's record did not settle: %d logins unsettled, %+v", rec.Unsettled, rec.Connections)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAMQPConnectionsEverFolds: the fold keys a connection by its pid, so
// an event read twice or a close read before its open changes nothing; a
// login awaiting its close is unsettled; an event without a pid is an
// error, not a connection missed.
func TestAMQPConnectionsEverFolds(t *testing.T) {
	created := func(pid, user, name string) AMQPEvent {
		return AMQPEvent{Key: "connection.created", Headers: map[string]any{
			"pid": pid, "name": "peer " + pid, "user": user, "user_provided_name": name, "ssl_protocol": "tlsv1.3"}}
	}
	closed := func(pid, name string) AMQPEvent {
		return AMQPEvent{Key: "connection.closed", Headers: map[string]any{"pid": pid, "name": "peer " + pid, "user_provided_name": name}}
	}
	login := func(pid, user, refused string) AMQPEvent {
		key, h := "user.authentication.success", map[string]any{"name": user, "connection_name": "peer " + pid}
		if refused != "" {
			key = "user.authentication.failure"
			// An Erlang string, as the broker sends it.
			var codes []any
			for _, r := range refused {
				codes = append(codes, int64(r))
			}
			h["error"] = codes
		}
		return AMQPEvent{Key: key, Headers: h}
	}
	events := []AMQPEvent{
		login("<1>", "a", ""), created("<1>", "a", "first"), closed("<1>", "first"), created("<1>", "a", "first"),
		closed("<2>", "second"), created("<2>", "b", "second"),
		login("<3>", "c", "user 'c' - invalid credentials"), closed("<3>", "pry"),
		login("<4>", "d", ""), closed("<4>", "no vhost"),
		login("<5>", "e", ""), created("<5>", "e", "open"),
		login("<6>", "f", "user 'f' - invalid credentials"),
	}
	rec, err := AMQPConnectionsEver(events)
	if err != nil {
		t.Fatal(err)
	}
	want := []Connection{
		{User: "a", Name: "first", Reason: "closed", TLSVersion: "1.3"},
		{User: "b", Name: "second", Reason: "closed", TLSVersion: "1.3"},
		{User: "c", Name: "pry", Reason: "login refused: user 'c' - invalid credentials"},
		{User: "d", Name: "no vhost", Reason: "closed before it was opened"},
		{User: "e", Name: "open", TLSVersion: "1.3"},
	}
	if fmt.Sprint(rec.Connections) != fmt.Sprint(want) || rec.Unsettled != 1 {
		t.Errorf("got %+v, %d unsettled; want %+v, 1 unsettled (f's refused login)", rec.Connections, rec.Unsettled, want)
	}
	if missing := NotRecorded([]Connection{{User: "e", Name: "open"}, {User: "g", Name: "unseen"}}, rec); fmt.Sprint(missing) != fmt.Sprint([]Connection{{User: "g", Name: "unseen"}}) {
		t.Errorf("expected only g's connection not recorded, got %+v", missing)
	}
	if _, err := AMQPConnectionsEver([]AMQPEvent{{Key: "connection.closed", Headers: map[string]any{"name": "x"}}}); err == nil {
		t.Error("expected a connection event without a pid refused")
	}
}
