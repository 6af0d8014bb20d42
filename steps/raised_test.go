package steps

import (
	"context"
	"strings"
	"testing"

	"github.com/meshbus/mesh/harness"
)

// bareMesh is a Mesh with none of the optional capabilities: only the
// methods of harness.Mesh are promoted from the embedded interface.
type bareMesh struct{ harness.Mesh }

// storeMesh is a Mesh whose topology has a store.
type storeMesh struct {
	bareMesh
	rows [][]string
}

func (m storeMesh) QueryStore(context.Context, string) ([][]string, error) { return m.rows, nil }

// amqpMesh is a Mesh that can raise an AMQP broker, counting the raises.
type amqpMesh struct {
	bareMesh
	raised int
}

func (m *amqpMesh) RaiseAMQP(context.Context) (harness.AMQPBroker, error) {
	m.raised++
	return fakeBroker{}, nil
}

type fakeBroker struct{ harness.AMQPBroker }

func TestCapabilityNamesWhatTheClusterLacks(t *testing.T) {
	r := &raised{cluster: bareMesh{}}
	for name, err := range map[string]error{
		"StoreQuerier": errOf(capability[harness.StoreQuerier](r)),
		"NATSConfig":   errOf(capability[harness.NATSConfig](r)),
		"AMQPRaiser":   errOf(capability[harness.AMQPRaiser](r)),
		"ModuleRunner": errOf(capability[harness.ModuleRunner](r)),
	} {
		if err == nil || !strings.Contains(err.Error(), "harness."+name) {
			t.Errorf("expected an error naming harness.%s, got %v", name, err)
		}
	}
}

func TestCapabilityHandsOverTheClustersOwn(t *testing.T) {
	want := [][]string{{"node-a", "enrolled"}}
	r := &raised{cluster: storeMesh{rows: want}}
	st, err := capability[harness.StoreQuerier](r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.QueryStore(context.Background(), "select 1")
	if err != nil || len(got) != 1 || got[0][0] != "node-a" {
		t.Fatalf("expected the cluster's own store rows %v, got %v, %v", want, got, err)
	}
	if _, err := capability[harness.NATSConfig](r); err == nil {
		t.Fatal("expected a cluster with a store only to have no NATS configuration")
	}
}

func TestRaiseAMQPRaisesOnceAndKeepsTheBroker(t *testing.T) {
	m := &amqpMesh{}
	r := &raised{cluster: m}
	for range 2 {
		if err := r.raiseAMQP(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if m.raised != 1 || r.amqp == nil {
		t.Fatalf("expected one raise and the broker kept, got %d raises, broker %v", m.raised, r.amqp)
	}

	bare := &raised{cluster: bareMesh{}}
	if err := bare.raiseAMQP(context.Background()); err == nil || !strings.Contains(err.Error(), "harness.AMQPRaiser") {
		t.Fatalf("expected an error naming harness.AMQPRaiser, got %v", err)
	}
	if bare.amqp != nil {
		t.Fatalf("expected no broker kept, got %v", bare.amqp)
	}
}

// errOf is the error of a (value, error) pair.
func errOf[T any](_ T, err error) error { return err }
