package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/amqpadmin"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestAMQPMeshEnrolsAHostAndItsModulesTalk raises a mesh on AMQP alone,
// as genesis --bus amqp and mesh-controller run do, against a real
// RabbitMQ started with the files genesis wrote: a token issued is made
// live through the management API, a host enrols with it onto the broker,
// reads its declaration and its modules' credentials as itself, and a
// module on one node emits an event that a module on the other consumes,
// both on the credentials the controller sealed to their host. No NATS
// server runs.
func TestAMQPMeshEnrolsAHostAndItsModulesTalk(t *testing.T) {
	if testing.Short() {
		t.Skip("RabbitMQ container tests are skipped in -short mode")
	}
	m := controllertest.SampleMesh(t)
	tlsPort, mgmtPort := testutil.FreePort(t), testutil.FreePort(t)
	m.AMQP = &meshdesc.AMQP{Names: []string{"127.0.0.1", "localhost"}, Port: tlsPort, Management: "127.0.0.1", ManagementPort: mgmtPort}
	m = controllertest.Revalidate(t, m)
	dir := filepath.Join(t.TempDir(), "state")
	st := store.FileStore(dir)
	log := controllertest.Logger(t)
	o := rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP, AMQPAdmin: amqpadmin.ApplyAs, Logger: log}
	// The broker's start alone may take most of controllertest.Ctx's 20 s
	// on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := rollout.Genesis(ctx, m, st, dir, o); err != nil {
		t.Fatal(err)
	}
	l := statedir.Layout{Dir: dir}
	var f amqptest.Files
	for path, into := range map[string]*[]byte{l.AMQPCert(): &f.CertPEM, l.AMQPKey(): &f.KeyPEM, l.AMQPDefinitions(): &f.Definitions} {
		var err error
		if *into, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	amqptest.StartWith(t, f, tlsPort, amqptest.WithManagementAt(mgmtPort))

	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- controller.Run(runCtx, m, st, controller.RunOptions{Dir: dir, Apply: o, Logger: log, StartTimeout: 2 * time.Minute})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("the controller: %v", err)
		}
	})

	creds := map[string]wire.Credential{}
	keys := map[string]func([]byte) ([]byte, error){}
	hosts := map[string]plane.Host{}
	for _, node := range []string{"node-a", "node-b"} {
		_, doc, err := rollout.IssueToken(ctx, m, st, dir, node, time.Hour, o)
		if err != nil {
			t.Fatalf("issue a token for %s: %v", node, err)
		}
		tok, err := wire.ParseCredential(doc)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Scheme() != "amqps" {
			t.Fatalf("expected the token on the broker, got scheme %q", tok.Scheme())
		}
		cred, key, err := controllertest.EnrolWithin(t, tok, 90*time.Second)
		if err != nil {
			t.Fatalf("enrol %s: %v", node, err)
		}
		if cred.Scheme() != "amqps" || cred.Node != node || cred.Principal != wire.PrincipalHost {
			t.Fatalf("expected %s's host credential on the broker, got %s of %s", node, cred.Scheme(), cred.User())
		}
		// On AMQP the host's user is live before its answer goes
		// (control's composeForAnswers): its first login is let in. A
		// refused one would cost the host three seconds (RabbitMQ holds a
		// refused login that long before it closes it).
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		h, err := buses.DialHost(dctx, cred)
		cancel()
		if err != nil {
			t.Fatalf("%s's first login as its host, right after its answer: %v", node, err)
		}
		defer h.Close()
		creds[node], keys[node], hosts[node] = cred, key.Open, h
	}

	modules := map[string]string{} // module → its credential's file
	for node := range creds {
		h := hosts[node]
		var answer wire.CredentialsAnswer
		controllertest.Eventually(t, 30*time.Second, node+" is answered its modules' credentials", func() bool {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			data, err := h.Credentials(c, node)
			return err == nil && json.Unmarshal(data, &answer) == nil && answer.Refused == ""
		})
		for mod, sealed := range answer.Sealed {
			doc, err := keys[node](sealed)
			if err != nil {
				t.Fatalf("%s opens %s's credential: %v", node, mod, err)
			}
			path := filepath.Join(t.TempDir(), mod+".json")
			if err := os.WriteFile(path, doc, 0o600); err != nil {
				t.Fatal(err)
			}
			modules[mod] = path
		}
	}

	for _, name := range []string{wire.EnvNode, wire.EnvModule} {
		t.Setenv(name, "")
		_ = os.Unsetenv(name)
	}
	logger, err := sdk.Connect(ctx, modules["logger"], sdk.WithLogger(log))
	if err != nil {
		t.Fatalf("logger connects on its sealed credential: %v", err)
	}
	defer logger.Close()
	got := make(chan string, 1)
	if err := logger.Subscribe("sensor.reading", func(_ context.Context, ev sdk.Event) error {
		select {
		case got <- string(ev.Body):
		default:
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sensor, err := sdk.Connect(ctx, modules["sensor"], sdk.WithLogger(log))
	if err != nil {
		t.Fatalf("sensor connects on its sealed credential: %v", err)
	}
	defer sensor.Close()
	if _, err := sensor.Publish(ctx, "reading", []byte(`{"v":1}`)); err != nil {
		t.Fatalf("sensor emits: %v", err)
	}
	select {
	case body := <-got:
		if body != `{"v":1}` {
			t.Fatalf(`expected logger to consume {"v":1}, got %s`, body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("expected logger to consume sensor's reading within 30 s, nothing came")
	}

	// The token, spent, is refused a second time: the broker still knows
	// its user for the grace, the controller refuses the claim.
	_, doc, err := rollout.IssueToken(ctx, m, st, dir, "node-a", time.Hour, o)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := wire.ParseCredential(doc)
	if _, _, err := controllertest.EnrolWithin(t, tok, 90*time.Second); err != nil {
		t.Fatalf("a second token for node-a enrols it again: %v", err)
	}
	if _, _, err := controllertest.EnrolWithin(t, tok, 30*time.Second); err == nil || !strings.Contains(err.Error(), "spent") {
		t.Fatalf("expected the spent token refused as spent, got %v", err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("ran out of time")
	}
}
