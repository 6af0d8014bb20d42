package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/sdk"
)

// catalogMain is a module's code, written once against the contract: it
// connects with the credential it is given and serves its tool. Nothing
// in it names a bus.
func catalogMain(ctx context.Context, credentialPath string) (*sdk.Module, error) {
	m, err := sdk.Connect(ctx, credentialPath)
	if err != nil {
		return nil, err
	}
	if err := m.Handle("catalog_tools", func(_ context.Context, args []byte) ([]byte, error) {
		return append([]byte(`{"tools":`), append(args, '}')...), nil
	}); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// The same module code serves its tool on AMQP and then on NATS, the bus
// chosen by the credential alone (ADR 0039, in process; the bed runs it
// as one binary in a container).
func amqpOneModuleOnEitherBus(t *testing.T, am *amqpMesh) {
	nats := startMesh(t, natsplane.DefaultPolicy())
	for _, bus := range []struct {
		name, catalogCred string
		connect           func(testing.TB, string) *sdk.Module
	}{
		{"amqp", writeCred(t, am.br.Creds[catalogUser]), am.connect},
		{"nats", nats.credFile(t, catalogUser), nats.connect},
	} {
		catalog, err := catalogMain(ctxFor(t, 10*time.Second), bus.catalogCred)
		if err != nil {
			t.Fatalf("%s: run the module: %v", bus.name, err)
		}
		caller := bus.connect(t, loggerUser)
		out, err := caller.Request(ctxFor(t, 5*time.Second), "mesh-catalog", "catalog_tools", []byte(`"all"`))
		if err != nil || string(out) != `{"tools":"all"}` {
			t.Fatalf("%s: expected the module's answer, got %s, %v", bus.name, out, err)
		}
		if err := catalog.Close(); err != nil {
			t.Fatalf("%s: close the module: %v", bus.name, err)
		}
	}
}
