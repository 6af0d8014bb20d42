package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
	"github.com/meshbus/mesh/observe/amqproutes"
)

// TestObserveWatchesTheControlPlanesFirehose: the bus adds its observer
// once, watches the control plane's firehose from outside on the
// broker's published port and certificate, counts queues by the broker's
// own list, and turns tracing off when the watch ends, so that a second
// watch starts on a quiet firehose.
func TestObserveWatchesTheControlPlanesFirehose(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	br := amqptest.Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bus := &AMQPBus{ctr: br.Container, fingerprint: br.Fingerprint}
	ctl := br.Dial(t, wire.ControllerUser)
	push, err := wire.ControlQueue(wire.SubjectPush)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(id string) {
		t.Helper()
		if o, err := amqproutes.Publish(ctx, ctl, wire.ExchangeControl, wire.SubjectPush, true, amqp.Publishing{MessageId: id, Body: []byte(id)}); err != nil || o != amqproutes.Taken {
			t.Fatalf("publish %s: %v %v", id, o, err)
		}
	}
	watched := func(tr *observe.AMQPTrace, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(tr.PublishedInto(push, 0)) != want {
			if time.Now().After(deadline) {
				t.Fatalf("expected %d publishes into %s traced, got %+v", want, push, tr.PublishedInto(push, 0))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	for round := range 2 {
		tr, err := bus.Observe(ctx)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		id := fmt.Sprintf("push-%d", round)
		publish(id)
		watched(tr, 1)
		if got := tr.PublishedInto(push, 0)[0].MessageID; got != id {
			t.Fatalf("round %d: expected %s traced, got %s", round, id, got)
		}
		body, err := bus.ListQueues(ctx, wire.AMQPControlVhost, observe.AMQPQueuesColumns...)
		if err != nil {
			t.Fatal(err)
		}
		qs, err := observe.AMQPQueues(body)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := qs[push]; !ok {
			t.Fatalf("expected %s among the control plane's queues, got %v", push, qs)
		}
		if err := tr.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		if err := tr.Alive(); err == nil {
			t.Fatalf("round %d: expected the watch over once closed", round)
		}
	}
	out, err := br.Container.Ctl(ctx, "list_vhosts", "-q", "name", "tracing")
	if err != nil {
		t.Fatal(err)
	}
	tracing := ""
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == wire.AMQPControlVhost {
			tracing = f[1]
		}
	}
	if tracing != "false" {
		t.Fatalf("expected tracing off in %s once the watch ended, rabbitmqctl lists:\n%s", wire.AMQPControlVhost, out)
	}
}
