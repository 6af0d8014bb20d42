package amqptest

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// The broker serves the mesh's definitions over TLS: every principal
// logs in with its credential, the topology is there, and a module
// declares nothing.
func TestBrokerServesTheDefinitions(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b := Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, u := range slices.Concat(amqpdefs.Users(m), amqpdefs.ControlUsers(m)) {
		b.Dial(t, u)
	}
	have := map[string][]string{}
	for _, q := range b.Definitions.Queues {
		if _, ok := have[q.Vhost]; !ok {
			have[q.Vhost] = b.QueuesIn(ctx, t, q.Vhost)
		}
		if !slices.Contains(have[q.Vhost], q.Name) {
			t.Errorf("expected queue %s declared in %s, have %v", q.Name, q.Vhost, have[q.Vhost])
		}
	}
	if n := b.Unacked(ctx, t, wire.ControllerMeshUser); n != 0 {
		t.Errorf("expected nothing unacknowledged, got %d", n)
	}
	ch, err := b.Dial(t, wire.AMQPUser("node-a", "sensor")).Channel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.QueueDeclare("mine", false, true, true, false, nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.AccessRefused {
		t.Fatalf("expected a module's declare refused (403), got %v", err)
	}
	b.Reset(ctx, t)
}
