package sdk_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// The floor: every implementation reads the same credential, and refuses
// one whose fingerprint does not match what the bus presents.
func connectReadsTheCredential(t *testing.T, b bus) {
	m := b.connect(t, sensorUser)
	if m.Node() != "node-a" || m.Name() != "sensor" {
		t.Fatalf("expected sensor on node-a, got %s on %s", m.Name(), m.Node())
	}
	if _, err := m.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{}`)); err != nil {
		t.Fatalf("expected a connected module to publish, got %v", err)
	}

	// The credential's path may come from the environment.
	t.Setenv(wire.EnvCredential, writeCred(t, b.credential(loggerUser)))
	fromEnv, err := sdk.Connect(ctxFor(t, 5*time.Second), "")
	if err != nil {
		t.Fatalf("connect with %s: %v", wire.EnvCredential, err)
	}
	defer fromEnv.Close()
	if fromEnv.Name() != "logger" {
		t.Fatalf("expected logger, got %s", fromEnv.Name())
	}
}

func connectRefusesAnotherCertificate(t *testing.T, b bus) {
	cred := b.credential(sensorUser)
	cred.Fingerprint = strings.Repeat("ab", 32)
	_, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, cred))
	if !errors.Is(err, sdk.ErrFingerprint) {
		t.Fatalf("expected ErrFingerprint, got %v", err)
	}
	if b.busName() == "amqp" {
		// Plain amqp:// has no certificate to pin: a scoped credential over
		// it is refused, naming the field, before anything is dialled.
		// (NATS's credential has no plain form to try.)
		plain := b.credential(sensorUser)
		plain.URL = "amqp" + plain.URL[len("amqps"):]
		if _, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, plain)); !errors.Is(err, wire.ErrBadCredential) {
			t.Fatalf("expected a scoped credential over amqp:// refused, got %v", err)
		}
	}
}

func TestConnectRefusesWhatIsNotAModuleCredential(t *testing.T) {
	tm := startMesh(t, natsplane.DefaultPolicy())
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noModule := tm.srv.Creds[sensorUser]
	noModule.Module = ""
	amqp := tm.srv.Creds[sensorUser]
	amqp.URL = "amqp://u:p@127.0.0.1:5672/mesh"
	personOnAMQP := tm.srv.Creds[wire.PersonUser("alice")]
	personOnAMQP.URL = "amqps://person.alice:p@127.0.0.1:5671/mesh"
	cases := []struct {
		what string
		path string
		want error
		text string
	}{
		{"a bootstrap URL", write("boot", "tls://"+tm.srv.Addr()+"\n"), sdk.ErrBootstrap, ""},
		{"a credential without module", writeCred(t, noModule), wire.ErrBadCredential, "field module is missing"},
		{"a host's credential", tm.credFile(t, wire.HostUser("node-a")), wire.ErrBadCredential, "neither a module nor a person"},
		{"a person's credential on AMQP", writeCred(t, personOnAMQP), wire.ErrBadCredential, "a person's client speaks NATS"},
		{"plain AMQP, nothing to pin", writeCred(t, amqp), wire.ErrBadCredential, "want amqps"},
		{"no file", filepath.Join(dir, "absent"), os.ErrNotExist, ""},
	}
	for _, c := range cases {
		_, err := sdk.Connect(ctxFor(t, 5*time.Second), c.path)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: expected %v naming %q, got %v", c.what, c.want, c.text, err)
		}
	}
}

// Identity comes from the credential: the environment disagrees, the
// credential wins, the environment is overwritten, and the emitted event
// carries the credential's identity.
func identityComesFromTheCredential(t *testing.T, b bus) {
	t.Setenv(wire.EnvNode, "node-z")
	t.Setenv(wire.EnvModule, "impostor")
	m, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, b.credential(sensorUser)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := os.Getenv(wire.EnvNode); got != "node-a" {
		t.Errorf("expected %s overwritten with node-a, got %q", wire.EnvNode, got)
	}
	if got := os.Getenv(wire.EnvModule); got != "sensor" {
		t.Errorf("expected %s overwritten with sensor, got %q", wire.EnvModule, got)
	}
	if _, err := m.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{"celsius":20}`)); err != nil {
		t.Fatal(err)
	}
	h := b.storedEvent(t, "sensor", "reading").header
	if !slices.Equal(h[wire.HeaderSource], []string{"sensor"}) || !slices.Equal(h[wire.HeaderNode], []string{"node-a"}) {
		t.Fatalf("expected x-source sensor and x-node node-a, got %q and %q", h[wire.HeaderSource], h[wire.HeaderNode])
	}
}

// A module whose events consumer (NATS) or queue (AMQP) the mesh has not
// created is told so, by name, and nothing is created on its behalf.
func subscribeWithoutConsumer(t *testing.T, b bus) {
	b.dropConsumer(t, "node-b", "logger")
	logger := b.connect(t, loggerUser)
	err := logger.Subscribe("sensor.reading", func(context.Context, sdk.Event) error { return nil })
	if name := b.consumerName("node-b", "logger"); !errors.Is(err, sdk.ErrNoConsumer) || !strings.Contains(err.Error(), name) {
		t.Fatalf("expected ErrNoConsumer naming %s, got %v", name, err)
	}
	if b.hasConsumer(t, "node-b", "logger") {
		t.Fatal("expected the SDK to create no consumer")
	}

	// A module whose manifest consumes nothing has no consumer either; on
	// NATS its account may not even ask, and that is the same answer, at
	// once (not at nats.go's 5 s timeout).
	sensor := b.connect(t, sensorUser)
	start := time.Now()
	err = sensor.Subscribe("logger.anything", func(context.Context, sdk.Event) error { return nil })
	if name := b.consumerName("node-a", "sensor"); !errors.Is(err, sdk.ErrNoConsumer) || !strings.Contains(err.Error(), name) {
		t.Fatalf("expected ErrNoConsumer naming %s, got %v", name, err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("expected the refusal at once, took %s", d)
	}
}
