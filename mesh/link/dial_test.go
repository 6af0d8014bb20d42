package link_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

func start(t *testing.T) (*natstest.Server, wire.Credential) {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t, m)
	return s, s.Creds[wire.ModuleUser("node-a", "sensor")]
}

func dial(t *testing.T, cred wire.Credential, opts ...link.Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := link.Dial(ctx, cred, opts...)
	if err == nil {
		nc.Close()
	}
	return err
}

func TestDialPinsTheFingerprintAndChecksTheName(t *testing.T) {
	s, cred := start(t)
	if err := dial(t, cred); err != nil {
		t.Fatalf("expected the credential to connect: %v", err)
	}

	other := cred
	other.Fingerprint = strings.Repeat("0", 64)
	err := dial(t, other)
	if !errors.Is(err, link.ErrFingerprint) {
		t.Fatalf("expected ErrFingerprint for another certificate's pin, got %v", err)
	}
	// Both named: what the credential pinned and what the server showed.
	if !strings.Contains(err.Error(), "pinned "+other.Fingerprint[:16]) || !strings.Contains(err.Error(), "presented "+s.Fingerprint[:16]) || strings.Contains(err.Error(), cred.Password()) {
		t.Fatalf("expected the error to name the pinned and the presented fingerprint and not the password, got %v", err)
	}

	// Same pinned certificate, dialled by a name it does not carry.
	renamed := cred
	renamed.URL = wire.BusURL(cred.User(), "pw-"+cred.User(), "elsewhere.example:4222")
	err = dial(t, renamed, link.WithAddress(s.Addr()))
	if err == nil || !strings.Contains(err.Error(), "certificate name") {
		t.Fatalf("expected the name check to refuse a name the certificate lacks, got %v", err)
	}

	// The certificate's other names are accepted through the same address.
	aliased := cred
	aliased.URL = wire.BusURL(cred.User(), "pw-"+cred.User(), "nats:4222")
	if err := dial(t, aliased, link.WithAddress(s.Addr())); err != nil {
		t.Fatalf("expected a name the certificate carries to pass: %v", err)
	}
}

func TestDialRefusesABootstrapURL(t *testing.T) {
	boot, err := wire.ParseCredential([]byte("tls://nats:4222"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(t, boot); !errors.Is(err, link.ErrBootstrap) {
		t.Fatalf("expected ErrBootstrap, got %v", err)
	}
}

func TestDialUsesTheCredentialsInbox(t *testing.T) {
	_, cred := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := link.Dial(ctx, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if inbox := nc.NewRespInbox(); !strings.HasPrefix(inbox, wire.ModuleInbox("node-a", "sensor")+".") {
		t.Fatalf("expected replies under the module's own inbox prefix, got %s", inbox)
	}
}

// TestDialNeverEchoesThePassword: the error a module logs when its
// credential's URL cannot be read shows the URL without its password.
func TestDialNeverEchoesThePassword(t *testing.T) {
	const pw = "s3cret-PW-77a"
	for _, u := range []string{
		"tls://mod.node-a.sensor:" + pw + "@nats:bad",
		"tls://mod.node-a.sensor:" + pw + "%zz@nats:4222",
		"tls://mod.node-a.sensor:" + pw + "@:4222",
	} {
		cred := wire.Credential{URL: u, Fingerprint: strings.Repeat("0", 64), Node: "node-a", Module: "sensor"}
		err := dial(t, cred)
		if !errors.Is(err, wire.ErrBadCredential) {
			t.Fatalf("%s: expected ErrBadCredential, got %v", wire.RedactURL(u), err)
		}
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("the dial error carries the password: %v", err)
		}
	}
}
