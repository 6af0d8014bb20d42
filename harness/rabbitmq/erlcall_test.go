package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestErlSpelling: what goes into an expression erl_call evaluates is
// spelled, never pasted: a binary as its bytes, an info item only if it
// is an atom that needs no quoting.
func TestErlSpelling(t *testing.T) {
	for in, want := range map[string]string{"": "<<>>", "control": "<<99,111,110,116,114,111,108>>", `a"b\` + "\n": "<<97,34,98,92,10>>"} {
		if got := erlBinary(in); got != want {
			t.Errorf("erlBinary(%q): expected %s, got %s", in, want, got)
		}
	}
	if got, err := erlAtoms([]string{"name", "messages_ready"}); err != nil || got != "[name,messages_ready]" {
		t.Errorf("expected [name,messages_ready], got %q, %v", got, err)
	}
	for _, bad := range []string{"Name", "name]), halt(", "", "'name'", "messages ready"} {
		if got, err := erlAtoms([]string{"name", bad}); err == nil {
			t.Errorf("expected info item %q refused, got %q", bad, got)
		}
	}
}

// brokersOwnCalls checks, on a running broker, that what the harness asks
// through erl_call is what rabbitmqctl says: the queues' counts and the
// bindings read the same, a user added and permitted can log in with
// exactly those permissions, the firehose goes on and off. ctlOnly runs
// the same through rabbitmqctl alone, as an image without erl_call does.
func brokersOwnCalls(t *testing.T, ctx context.Context, c *RabbitMQContainer, ctlOnly bool) {
	c.ctlOnly = ctlOnly
	defer func() { c.ctlOnly = false }()
	mode := "erl"
	if ctlOnly {
		mode = "ctl"
	}
	const vhost = "mesh"
	classic, quorum, key := "q.classic-"+mode, "q.quorum-"+mode, "k."+mode

	addr, err := c.Address(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(URL(addr, c.AdminUsername, c.AdminPassword, vhost))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(classic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(quorum, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(classic, key, "amq.topic", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{classic, classic, quorum} {
		conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := conf.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("publish to %s: expected a confirm, got %v, %v", q, ok, err)
		}
	}
	// One of the classic queue's two taken and not acknowledged while the
	// counts are read.
	if _, ok, err := ch.Get(classic, false); !ok || err != nil {
		t.Fatalf("get from %s: expected a message, got %v, %v", classic, ok, err)
	}

	columns := []string{"name", "messages", "messages_ready", "messages_unacknowledged"}
	want := map[string][3]float64{classic: {2, 1, 1}, quorum: {1, 1, 0}}
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.ListQueues(ctx, vhost, columns...)
		if err != nil {
			t.Fatal(err)
		}
		last = "list_queues: " + string(got)
		counts := queueCounts(t, got)
		maps.DeleteFunc(counts, func(name string, _ [3]float64) bool { _, ok := want[name]; return !ok })
		if reflect.DeepEqual(counts, want) {
			ctl, err := c.Ctl(ctx, append([]string{"list_queues", "-q", "-p", vhost, "--formatter", "json"}, columns...)...)
			if err == nil && sameRows(t, got, []byte(ctl)) {
				break
			}
			last += "; rabbitmqctl list_queues: " + ctl
		}
		if time.Now().After(deadline) {
			t.Fatalf("expected %s holding 2 (1 ready, 1 unacknowledged) and %s 1, as rabbitmqctl counts them, within 30s; last: %s", classic, quorum, last)
		}
		time.Sleep(250 * time.Millisecond)
	}

	bindings, err := c.ListBindings(ctx, vhost, "source_name", "routing_key", "destination_name")
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := c.Ctl(ctx, "list_bindings", "-q", "-p", vhost, "--formatter", "json", "source_name", "routing_key", "destination_name")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(bindings), `"routing_key":"`+key+`"`) || !sameRows(t, bindings, []byte(ctl)) {
		t.Errorf("expected the bindings, amq.topic's %s among them, as rabbitmqctl lists them:\n%s\ngot:\n%s", key, ctl, bindings)
	}

	user, password := "watcher-"+mode, "pw-"+mode
	if err := c.AddUser(ctx, user, password); err != nil {
		t.Fatal(err)
	}
	own := `^w\.` + mode + `$`
	if err := c.SetPermissions(ctx, vhost, user, own, own, own); err != nil {
		t.Fatal(err)
	}
	perms, err := c.Ctl(ctx, "list_user_permissions", "-q", "--formatter", "json", user)
	if err != nil {
		t.Fatal(err)
	}
	if wantPerms := fmt.Sprintf(`[{"vhost":%q,"configure":%q,"write":%q,"read":%q}]`, vhost, own, own, own); !sameRows(t, []byte(perms), []byte(wantPerms)) {
		t.Errorf("expected %s's permissions %s, rabbitmqctl lists %s", user, wantPerms, perms)
	}
	watcher, err := amqp.Dial(URL(addr, user, password, vhost))
	if err != nil {
		t.Fatalf("expected %s to log in to %s with its password, got %v", user, vhost, err)
	}
	watcher.Close()

	for _, on := range []bool{true, false} {
		if err := c.SetTracing(ctx, vhost, on); err != nil {
			t.Fatal(err)
		}
		out, err := c.Ctl(ctx, "list_vhosts", "-q", "--formatter", "json", "name", "tracing")
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"name":%q,"tracing":%t}`, vhost, on); !strings.Contains(strings.ReplaceAll(out, " ", ""), want) {
			t.Errorf("expected %s among the virtual hosts, rabbitmqctl lists %s", want, out)
		}
	}
}

// queueCounts reads list_queues' JSON as name → messages, ready,
// unacknowledged.
func queueCounts(t *testing.T, doc []byte) map[string][3]float64 {
	t.Helper()
	var rows []map[string]any
	if err := json.Unmarshal(doc, &rows); err != nil {
		t.Fatalf("list_queues: %v: %s", err, doc)
	}
	out := map[string][3]float64{}
	for _, r := range rows {
		var c [3]float64
		for i, k := range []string{"messages", "messages_ready", "messages_unacknowledged"} {
			c[i], _ = r[k].(float64)
		}
		out[fmt.Sprint(r["name"])] = c
	}
	return out
}

// sameRows says whether two JSON lists of objects hold the same objects,
// in any order.
func sameRows(t *testing.T, a, b []byte) bool {
	t.Helper()
	rows := func(doc []byte) []string {
		var list []map[string]any
		if err := json.Unmarshal(doc, &list); err != nil {
			t.Fatalf("%v: %s", err, doc)
		}
		out := make([]string, len(list))
		for i, m := range list {
			b, _ := json.Marshal(m) // keys sorted
			out[i] = string(b)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(rows(a), rows(b))
}
