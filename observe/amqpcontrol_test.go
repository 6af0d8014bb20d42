package observe

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe/amqproutes"
)

func TestAMQPQueuesReadsTheBrokersCounts(t *testing.T) {
	body := []byte(`[
{"name":"control.push","messages":3,"messages_ready":1,"messages_unacknowledged":2},
{"name":"control.enrol","messages":"","messages_ready":"","messages_unacknowledged":""},
{"name":"node.node-a","messages":1,"messages_ready":1,"messages_unacknowledged":0}
]`)
	qs, err := AMQPQueues(body)
	if err != nil {
		t.Fatal(err)
	}
	if got := qs["control.push"]; got != (AMQPQueue{Name: "control.push", Messages: 3, Ready: 1, Unacked: 2}) {
		t.Errorf("control.push: got %+v", got)
	}
	if got := qs["control.enrol"]; got.Messages != 0 || got.Name != "control.enrol" {
		t.Errorf("control.enrol, not counted yet: got %+v", got)
	}
	if _, err := AMQPQueues([]byte(`[{"name":"x","messages":{"a":1}}]`)); err == nil {
		t.Error("expected a count that is no number refused")
	}
}

func TestHeldInControlAreCONTROLsSubjects(t *testing.T) {
	qs := map[string]AMQPQueue{}
	for _, name := range []string{"control.push", "control.enrol", "control.built", "control.node-a.report", "control.source.modules.changed",
		"control.node-a.alive", "control.node-a.credentials", "node.node-a", "builds", "enrol.tok-1", "credentials.node-a", "observer.trace.x"} {
		qs[name] = AMQPQueue{Name: name}
	}
	var got []string
	for _, q := range HeldInControl(qs) {
		got = append(got, q.Name)
	}
	want := []string{"control.built", "control.enrol", "control.node-a.report", "control.push", "control.source.modules.changed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("expected %v, got %v", want, got)
	}
}

func TestReadTracedReadsTheFirehosesCopy(t *testing.T) {
	got, err := readTraced(amqp.Delivery{
		RoutingKey: wire.TraceKey(wire.TraceDeliver, "control.push"),
		Headers: amqp.Table{
			wire.TraceExchangeName: wire.ExchangeControl,
			wire.TraceRoutingKeys:  []any{wire.SubjectPush},
			wire.TraceRedelivered:  int32(1),
			wire.TraceUser:         wire.ControllerUser,
			wire.TraceProperties:   amqp.Table{wire.TracePropertyMessageID: "m-1"},
		},
		Body: []byte("push"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != wire.TraceDeliver || got.Queue != "control.push" || got.Exchange != wire.ExchangeControl || !got.Redelivered ||
		got.User != wire.ControllerUser || got.MessageID != "m-1" || string(got.Body) != "push" || fmt.Sprint(got.RoutingKeys) != "["+wire.SubjectPush+"]" {
		t.Fatalf("got %+v", got)
	}
	if _, err := readTraced(amqp.Delivery{RoutingKey: "other.x"}); err == nil {
		t.Fatal("expected a copy with another routing key refused")
	}
}

// controlBroker is RabbitMQ with the sample mesh's definitions, the
// observer added and tracing on in the control plane, as the harness
// does (harness.AMQPBus.Observe).
type controlBroker struct {
	br       *amqptest.Broker
	observer wire.Credential
}

func startControlBroker(t *testing.T) (context.Context, *controlBroker) {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	br := amqptest.Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	const password = "observer-password"
	if err := AddAMQPObserver(ctx, br.Container, password); err != nil {
		t.Fatal(err)
	}
	return ctx, &controlBroker{br: br, observer: AMQPObserverCredential(password, "rabbitmq:5671", br.Fingerprint)}
}

func (b *controlBroker) queues(ctx context.Context, t *testing.T) map[string]AMQPQueue {
	t.Helper()
	out, err := b.br.Container.Ctl(ctx, append([]string{"list_queues", "-q", "-p", wire.AMQPControlVhost, "--formatter", "json"}, AMQPQueuesColumns...)...)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := AMQPQueues([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// waitFor polls check for up to d (the broker's counts of a quorum queue
// follow its tick).
func waitFor(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %s: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTheFirehoseSeesWhatAPausedControllerHolds: a consumer that holds
// its deliveries unsettled (the controller's prefetch, opened before the
// trace) is seen handed each one, again each time it gives one back; the
// queue counts it held, not ready, so that no basic.get reads it; a
// host's reports are read as they reached the broker; and the observer
// may read nothing of the mesh's.
func TestTheFirehoseSeesWhatAPausedControllerHolds(t *testing.T) {
	ctx, b := startControlBroker(t)
	ctl := b.br.Dial(t, wire.ControllerUser)
	cch, err := ctl.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := cch.Qos(32, 0, false); err != nil {
		t.Fatal(err)
	}
	push, err := wire.ControlQueue(wire.SubjectPush)
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := cch.Consume(push, "controller", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Turned on after the controller's channel was opened, as in a bed.
	if err := b.br.Container.SetTracing(ctx, wire.AMQPControlVhost, true); err != nil {
		t.Fatal(err)
	}
	tr, err := WatchAMQPTrace(ctx, b.observer, b.br.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	mark := tr.Mark()

	if o, err := amqproutes.Publish(ctx, ctl, wire.ExchangeControl, wire.SubjectPush, true, amqp.Publishing{MessageId: "push-1", Body: []byte("a push")}); err != nil || o != amqproutes.Taken {
		t.Fatalf("publish the push: %v %v", o, err)
	}
	d := <-deliveries
	waitFor(t, 10*time.Second, "the push handed over once, held", func() error {
		if n := tr.Delivered(push, mark); n != 1 {
			return fmt.Errorf("delivered %d times", n)
		}
		q := b.queues(ctx, t)[push]
		if q.Messages != 1 || q.Unacked != 1 || q.Ready != 0 {
			return fmt.Errorf("%s counts %+v", push, q)
		}
		return nil
	})
	// Held: no basic.get reads it.
	if _, ok, err := cch.Get(push, false); err != nil || ok {
		t.Fatalf("expected a basic.get to read nothing while the controller holds the push, got %v %v", ok, err)
	}
	// Given back twice: handed over twice more, marked redelivered.
	for range 2 {
		if err := d.Nack(false, true); err != nil {
			t.Fatal(err)
		}
		d = <-deliveries
	}
	waitFor(t, 10*time.Second, "the push handed over 3 times", func() error {
		if n := tr.Delivered(push, mark); n != 3 {
			return fmt.Errorf("delivered %d times", n)
		}
		return nil
	})
	var again int
	for _, c := range tr.Seen()[mark:] {
		if c.Kind == wire.TraceDeliver && c.Queue == push {
			if c.MessageID != "push-1" || string(c.Body) != "a push" || c.User != wire.ControllerUser {
				t.Errorf("expected each delivery of push-1 to the controller, got %+v", c)
			}
			if c.Redelivered {
				again++
			}
		}
	}
	if again != 2 {
		t.Errorf("expected 2 deliveries marked redelivered, got %d", again)
	}
	if pub := tr.PublishedInto(push, mark); len(pub) != 1 || pub[0].MessageID != "push-1" || pub[0].Exchange != wire.ExchangeControl {
		t.Fatalf("expected the push published once into %s, got %+v", push, pub)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "CONTROL settled", func() error {
		for _, q := range HeldInControl(b.queues(ctx, t)) {
			if q.Messages != 0 {
				return fmt.Errorf("%s holds %+v", q.Name, q)
			}
		}
		return nil
	})

	// A host's reports, as they reached the broker.
	host := b.br.Dial(t, wire.HostUser("node-a"))
	at := time.Now().UTC().Truncate(time.Second)
	for i := range 2 {
		r := wire.Report{Kind: wire.KindReport, Node: "node-a", ID: fmt.Sprintf("r-%d", i), At: at.Add(time.Duration(i) * time.Second), Applied: 1}
		if o, err := amqproutes.Publish(ctx, host, wire.ExchangeControl, wire.NodeReport("node-a"), true, amqp.Publishing{MessageId: r.ID, Body: r.Marshal()}); err != nil || o != amqproutes.Taken {
			t.Fatalf("report: %v %v", o, err)
		}
	}
	waitFor(t, 10*time.Second, "the reports traced", func() error {
		rs, err := TracedReports(tr, "node-a")
		if err != nil {
			return err
		}
		if len(rs) != 2 || rs[0].ID != "r-0" || rs[1].ID != "r-1" || !rs[1].At.Equal(at.Add(time.Second)) {
			return fmt.Errorf("got %+v", rs)
		}
		return nil
	})
	if rs, err := TracedReports(tr, "node-b"); err != nil || len(rs) != 0 {
		t.Fatalf("expected no report of node-b, got %+v (%v)", rs, err)
	}
	if err := tr.Misread(); err != nil {
		t.Fatal(err)
	}

	// The observer reads its own queue and nothing of the mesh's.
	obs, err := DialAMQP(ctx, b.observer, b.br.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = obs.Close() })
	for _, q := range []string{push, wire.NodeQueue("node-a"), wire.QueueBuilds} {
		o, err := amqproutes.Do(obs.Connection, func(ch *amqp.Channel) error { _, _, err := ch.Get(q, false); return err })
		if err != nil || o != amqproutes.Refused {
			t.Errorf("expected the observer refused a read of %s, got %v (%v)", q, o, err)
		}
	}
	if o, err := amqproutes.Publish(ctx, obs.Connection, wire.ExchangeControl, wire.SubjectPush, true, amqp.Publishing{Body: []byte("x")}); err != nil || o != amqproutes.Refused {
		t.Errorf("expected the observer refused a publish, got %v (%v)", o, err)
	}

	// Off: nothing more is copied.
	if err := b.br.Container.SetTracing(ctx, wire.AMQPControlVhost, false); err != nil {
		t.Fatal(err)
	}
	off := tr.Mark()
	if o, err := amqproutes.Publish(ctx, ctl, wire.ExchangeControl, wire.SubjectPush, true, amqp.Publishing{MessageId: "push-2", Body: []byte("b")}); err != nil || o != amqproutes.Taken {
		t.Fatalf("publish: %v %v", o, err)
	}
	<-deliveries
	time.Sleep(time.Second)
	if n := len(tr.Seen()) - off; n != 0 {
		t.Fatalf("expected nothing traced once tracing is off, got %d copies", n)
	}
}

// TestTheNewestDeclarationIsReadAndPublishedAgain: node.<node> is read
// and given back, the newest of two; the older, published again with the
// controller's credential, is what it then holds (drop-head), and a host
// may not publish one.
func TestTheNewestDeclarationIsReadAndPublishedAgain(t *testing.T) {
	ctx, b := startControlBroker(t)
	ctl := &AMQPClient{Connection: b.br.Dial(t, wire.ControllerUser)}
	subject := wire.NodeDeclare("node-a")
	older := SignedDeclaration{Subject: subject, Body: []byte(`{"revision":1}`), Signature: "sig-1"}
	newer := SignedDeclaration{Subject: subject, Body: []byte(`{"revision":2}`), Signature: "sig-2"}
	for _, d := range []SignedDeclaration{older, newer} {
		if err := ctl.Declare(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	read := func() SignedDeclaration {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		got, err := ctl.NewestDeclaration(rctx, "node-a")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); got.Subject != subject || string(got.Body) != string(newer.Body) || got.Signature != newer.Signature || got.Node() != "node-a" {
		t.Fatalf("expected the newer declaration, got %+v", got)
	}
	// Given back: read again, and counted once.
	if got := read(); string(got.Body) != string(newer.Body) {
		t.Fatalf("expected the newer declaration still there, got %+v", got)
	}
	if q := b.queues(ctx, t)[wire.NodeQueue("node-a")]; q.Messages != 1 || q.Ready != 1 {
		t.Fatalf("expected %s to hold one, ready, got %+v", wire.NodeQueue("node-a"), q)
	}
	if err := ctl.Declare(ctx, older); err != nil {
		t.Fatal(err)
	}
	if got := read(); string(got.Body) != string(older.Body) || got.Signature != older.Signature {
		t.Fatalf("expected the older declaration published again to be what the queue holds, got %+v", got)
	}
	if q := b.queues(ctx, t)[wire.NodeQueue("node-a")]; q.Messages != 1 {
		t.Fatalf("expected %s to hold one, got %+v", wire.NodeQueue("node-a"), q)
	}

	host := &AMQPClient{Connection: b.br.Dial(t, wire.HostUser("node-a"))}
	if err := host.Declare(ctx, newer); err == nil {
		t.Fatal("expected a host's declaration refused")
	}
	// A queue read empty is read again until the deadline.
	pch, err := ctl.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pch.QueuePurge(wire.NodeQueue("node-a"), false); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := ctl.NewestDeclaration(rctx, "node-a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expected an empty queue read until the deadline, got %v", err)
	}
}
