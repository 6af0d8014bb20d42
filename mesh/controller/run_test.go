package controller

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/controller/control"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestRunWaitsForTheServerThenIsReady starts the controller before the
// server: it retries, asserts once the server is up, logs "ready" and
// returns nil when its context ends.
func TestRunWaitsForTheServerThenIsReady(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	var logs testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, b.M, b.St, RunOptions{StartTimeout: 30 * time.Second, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	}()
	controllertest.Eventually(t, 10*time.Second, "a failed attempt logged", func() bool { return strings.Contains(logs.String(), "retrying") })
	if strings.Contains(logs.String(), `"msg":"ready"`) {
		t.Fatal("ready before the server exists")
	}
	b.Start()
	controllertest.Eventually(t, 20*time.Second, `"msg":"ready" logged`, func() bool { return strings.Contains(logs.String(), `"msg":"ready"`) })
	if _, err := b.JS().Stream(controllertest.Ctx(t), wire.StreamEvents); err != nil {
		t.Fatalf("ready without EVENTS: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("expected nil after the context ended, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
	}
}

// TestStartRefusesDriftAtOnce: waiting cannot fix a drift, so Start does
// not retry it until its deadline.
func TestStartRefusesDriftAtOnce(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	if _, err := b.JS().CreateStream(controllertest.Ctx(t), jetstream.StreamConfig{Name: wire.StreamBuilds, Subjects: []string{wire.SubjectBuildAll}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, _, err := Start(context.Background(), b.M, b.St, RunOptions{StartTimeout: 30 * time.Second})
	if !errors.Is(err, ErrDrift) || !strings.Contains(err.Error(), "stream BUILDS: retention: expected WorkQueue, got Limits") {
		t.Fatalf("expected ErrDrift naming BUILDS's storage, got %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("drift refused after %v; expected at once", took)
	}
}

// TestStartRefusesAnotherCertificateAtOnce: a controller whose
// credentials pin a certificate other than the one the server presents
// does not wait for it to change (waiting cannot fix it): Start stops at
// once, naming both fingerprints and not the password.
func TestStartRefusesAnotherCertificateAtOnce(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	ctx := controllertest.Ctx(t)
	presented := b.Credential(wire.ControllerUser).Fingerprint
	pinned := strings.Repeat("0", 64)
	docs := map[string][]byte{}
	for _, u := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		c := b.Credential(u)
		c.Fingerprint = pinned
		docs[u] = c.Marshal()
	}
	if err := b.St.Update(ctx, func(tx store.Tx) error { _, err := tx.PutCredentials(ctx, docs); return err }); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, _, err := Start(context.Background(), b.M, b.St, RunOptions{StartTimeout: 30 * time.Second})
	if !errors.Is(err, link.ErrFingerprint) {
		t.Fatalf("expected ErrFingerprint, got %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("another certificate refused after %v; expected at once", took)
	}
	if !strings.Contains(err.Error(), "pinned "+pinned[:16]) || !strings.Contains(err.Error(), "presented "+presented[:16]) || strings.Contains(err.Error(), b.Credential(wire.ControllerUser).Password()) {
		t.Fatalf("expected the error to name both fingerprints and not the password, got %v", err)
	}
}

// TestRunComposesWhatAStoppedControllerLeft: an enrolment answered and
// acknowledged, its composition never made (the controller stopped in
// between), is made live by the next controller's start: the node's new
// password is in nats.conf before the controller is ready.
func TestRunComposesWhatAStoppedControllerLeft(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	ctx := controllertest.Ctx(t)
	tok, _, req := b.Claim("node-a")
	e, err := control.Enrol(ctx, b.M, b.St, b.Dir, store.LedgerKey(wire.SubjectEnrol, "m1", 1), req.Marshal(), b.Opts, func(control.Enrolment) error { return nil })
	if err != nil || e.Answer.Refused != "" {
		t.Fatalf("enrol: %+v (%v)", e, err)
	}
	secrets, _ := b.St.Secrets(ctx)
	hash := secrets[wire.HostUser("node-a")].Hash
	conf := func() []byte { c, _ := os.ReadFile(statedir.Layout{Dir: b.Dir}.NATSConfig()); return c }
	if bytes.Contains(conf(), []byte(hash)) {
		t.Fatal("the enrolment was composed before the controller ran: the test shows nothing")
	}
	b.Start()
	var logs testutil.SyncBuffer
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, b.M, b.St, RunOptions{Dir: b.Dir, Apply: b.Opts, StartTimeout: 20 * time.Second, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	}()
	defer func() { cancel(); <-done }()
	controllertest.Eventually(t, 20*time.Second, "the controller ready", func() bool { return strings.Contains(logs.String(), `"msg":"ready"`) })
	if !bytes.Contains(conf(), []byte(hash)) {
		t.Fatal("expected the node's new password composed once the controller is ready")
	}
	// The spent token's user stays for its grace, then is revoked.
	controllertest.Eventually(t, b.Opts.SpentTokenGrace+10*time.Second, "the spent token's user revoked after its grace", func() bool {
		return !containsUser(conf(), wire.EnrolUser(tok.Name))
	})
}

// containsUser says whether the composed configuration conf has user.
func containsUser(conf []byte, user string) bool {
	return bytes.Contains(conf, []byte(strconv.Quote(user)))
}
