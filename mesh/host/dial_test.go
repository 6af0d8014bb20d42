package host

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestAHostWhoseBusShowsAnotherCertificateStopsAtOnce: a host whose
// credential pins a certificate other than the one the bus presents does
// not wait for it to change (waiting cannot fix it): it stops at once,
// naming both fingerprints and not its password, on either bus.
func TestAHostWhoseBusShowsAnotherCertificateStopsAtOnce(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, m)
	onNATS := srv.Creds[wire.HostUser("node-a")]
	onAMQP := onNATS
	addr, presented := tlsListener(t)
	onAMQP.URL = wire.AMQPControlURL(onNATS.User(), onNATS.Password(), addr)
	for bus, c := range map[string]struct {
		cred      wire.Credential
		presented string
	}{"nats": {onNATS, srv.Fingerprint}, "amqp": {onAMQP, presented}} {
		cred := c.cred
		cred.Fingerprint = strings.Repeat("0", 64)
		st := State{Dir: filepath.Join(t.TempDir(), "state")}
		if err := st.open(); err != nil {
			t.Fatal(err)
		}
		if err := st.PutCredential(cred); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		err := Run(ctx, Options{State: st})
		took := time.Since(start)
		cancel()
		if !errors.Is(err, link.ErrFingerprint) {
			t.Fatalf("%s: expected the host to stop on the certificate, got %v", bus, err)
		}
		if took > 5*time.Second {
			t.Fatalf("%s: expected the host to stop at once, it retried for %v", bus, took)
		}
		if !strings.Contains(err.Error(), "pinned "+cred.Fingerprint[:16]) || !strings.Contains(err.Error(), "presented "+c.presented[:16]) || strings.Contains(err.Error(), cred.Password()) {
			t.Fatalf("%s: expected the error to name both fingerprints and not the password, got %v", bus, err)
		}
	}
}

// tlsListener completes the TLS handshake of every connection with a
// certificate for 127.0.0.1, then hangs up: the pin is checked before any
// AMQP.
func tlsListener(t *testing.T) (addr, fingerprint string) {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("host-test", now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServer([]string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if fingerprint, err = pki.Fingerprint(certPEM); err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return ln.Addr().String(), fingerprint
}
