package sdk_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// The floor: every implementation reads the same credential, and refuses
// one whose fingerprint does not match what the bus presents.
func TestConnectReadsTheCredential(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	m := tm.connect(t, sensorUser)
	if m.Node() != "node-a" || m.Name() != "sensor" {
		t.Fatalf("expected sensor on node-a, got %s on %s", m.Name(), m.Node())
	}
	if _, err := m.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{}`)); err != nil {
		t.Fatalf("expected a connected module to publish, got %v", err)
	}

	// The credential's path may come from the environment.
	t.Setenv(wire.EnvCredential, tm.credFile(t, loggerUser))
	fromEnv, err := sdk.Connect(ctxFor(t, 5*time.Second), "")
	if err != nil {
		t.Fatalf("connect with %s: %v", wire.EnvCredential, err)
	}
	defer fromEnv.Close()
	if fromEnv.Name() != "logger" {
		t.Fatalf("expected logger, got %s", fromEnv.Name())
	}
}

func TestConnectRefusesAnotherCertificate(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	cred := tm.srv.Creds[sensorUser]
	cred.Fingerprint = strings.Repeat("ab", 32)
	_, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, cred))
	if !errors.Is(err, sdk.ErrFingerprint) {
		t.Fatalf("expected ErrFingerprint, got %v", err)
	}
}

func TestConnectRefusesWhatIsNotAModuleCredential(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
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
	cases := []struct {
		what string
		path string
		want error
		text string
	}{
		{"a bootstrap URL", write("boot", "tls://"+tm.srv.Addr()+"\n"), sdk.ErrBootstrap, ""},
		{"a credential without module", writeCred(t, noModule), wire.ErrBadCredential, "field module is missing"},
		{"a person's credential", tm.credFile(t, wire.PersonUser("alice")), wire.ErrBadCredential, "field principal"},
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
func TestIdentityComesFromTheCredential(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	t.Setenv(wire.EnvNode, "node-z")
	t.Setenv(wire.EnvModule, "impostor")
	m, err := sdk.Connect(ctxFor(t, 5*time.Second), tm.credFile(t, sensorUser))
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
	h := tm.stored(t, wire.EventSubject("sensor", "reading")).Header
	if h.Get(wire.HeaderSource) != "sensor" || h.Get(wire.HeaderNode) != "node-a" {
		t.Fatalf("expected x-source sensor and x-node node-a, got %q and %q", h.Get(wire.HeaderSource), h.Get(wire.HeaderNode))
	}
}

// A module whose consumer the mesh has not created is told so, by name,
// and nothing is created on its behalf.
func TestSubscribeWithoutConsumer(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	if err := tm.js.DeleteConsumer(ctxFor(t, 5*time.Second), wire.StreamEvents, loggerCons); err != nil {
		t.Fatal(err)
	}
	logger := tm.connect(t, loggerUser)
	err := logger.Subscribe("sensor.reading", func(context.Context, sdk.Event) error { return nil })
	if !errors.Is(err, sdk.ErrNoConsumer) || !strings.Contains(err.Error(), loggerCons) {
		t.Fatalf("expected ErrNoConsumer naming %s, got %v", loggerCons, err)
	}
	if _, err := tm.js.Consumer(ctxFor(t, 5*time.Second), wire.StreamEvents, loggerCons); err == nil {
		t.Fatal("expected the SDK to create no consumer")
	}

	// A module whose manifest consumes nothing has no consumer either; its
	// account may not even ask, and that is the same answer, at once.
	sensor := tm.connect(t, sensorUser)
	start := time.Now()
	err = sensor.Subscribe("logger.anything", func(context.Context, sdk.Event) error { return nil })
	if !errors.Is(err, sdk.ErrNoConsumer) || !strings.Contains(err.Error(), wire.ModuleConsumer("node-a", "sensor")) {
		t.Fatalf("expected ErrNoConsumer naming node-a_sensor, got %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("expected the refusal at once, not at nats.go's 5 s timeout: took %s", d)
	}
}
