package amqplink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

func config(url, fingerprint string) link.Config {
	return link.Config{
		Credential: wire.Credential{URL: url, Fingerprint: fingerprint, Node: "node-a", Module: "sensor"},
		Deliver:    func(link.Delivery) {},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Timeout:    2 * time.Second,
		Context:    context.Background(),
	}
}

func TestDialRefusesPlainAMQPAndBootstrap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Nothing listens: the refusal must come before any dial.
	_, err := Dial(ctx, config("amqp://u:p@127.0.0.1:1/mesh", strings.Repeat("ab", 32)))
	if !errors.Is(err, wire.ErrBadCredential) || !strings.Contains(err.Error(), "want amqps") {
		t.Fatalf("expected a scoped credential over amqp:// refused naming the url, got %v", err)
	}
	// A URL that does not read is named without its password (url.Parse's
	// own error quotes the URL whole).
	const pw = "s3cret-PW-19"
	for _, u := range []string{"amqps://mod.node-a.sensor:" + pw + "@127.0.0.1:bad/mesh", "amqps://mod.node-a.sensor:" + pw + "%zz@127.0.0.1:1/mesh"} {
		_, err := Dial(ctx, config(u, strings.Repeat("ab", 32)))
		if !errors.Is(err, wire.ErrBadCredential) || strings.Contains(err.Error(), pw) {
			t.Fatalf("expected ErrBadCredential without the password, got %v", err)
		}
	}
	boot := config("amqps://127.0.0.1:1", "")
	boot.Credential = wire.Credential{URL: boot.Credential.URL, Bootstrap: true}
	if _, err := Dial(ctx, boot); !errors.Is(err, link.ErrBootstrap) {
		t.Fatalf("expected ErrBootstrap, got %v", err)
	}
}

// tlsListener serves TLS with a certificate for names, and completes the
// handshake of every connection (then hangs up): enough to check the pin
// and the name, which come before any AMQP.
func tlsListener(t *testing.T, names ...string) (addr, fingerprint string) {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("amqplink-test", now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServer(names, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
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
	return ln.Addr().String(), fp
}

func TestDialPinsTheFingerprintAndChecksTheName(t *testing.T) {
	addr, fp := tlsListener(t, "rabbitmq", "127.0.0.1")
	_, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, err := Dial(ctx, config("amqps://u:s3cret-PW-19@"+addr+"/mesh", strings.Repeat("0", 64)))
	if !errors.Is(err, link.ErrFingerprint) {
		t.Fatalf("expected ErrFingerprint for another certificate's pin, got %v", err)
	}
	// Both named: what the credential pinned and what the server showed.
	if !strings.Contains(err.Error(), "pinned "+strings.Repeat("0", 16)) || !strings.Contains(err.Error(), "presented "+fp[:16]) || strings.Contains(err.Error(), "s3cret-PW-19") {
		t.Fatalf("expected the error to name the pinned and the presented fingerprint and not the password, got %v", err)
	}
	// The pinned certificate, dialled by a name it does not carry.
	_, err = Dial(ctx, config("amqps://u:p@localhost:"+port+"/mesh", fp))
	if err == nil || errors.Is(err, link.ErrFingerprint) || !strings.Contains(err.Error(), "certificate name") {
		t.Fatalf("expected the name check to refuse localhost, got %v", err)
	}
	// Pin and name both right: the TLS handshake passes and the
	// connection ends where AMQP would begin.
	_, err = Dial(ctx, config("amqps://u:p@"+addr+"/mesh", fp))
	if err == nil || errors.Is(err, link.ErrFingerprint) || strings.Contains(err.Error(), "certificate") {
		t.Fatalf("expected the handshake to pass and AMQP to fail, got %v", err)
	}
}

func TestDialIsBoundedByTheContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		// Accept and say nothing: a TLS handshake that never completes.
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Dial(ctx, config("amqps://u:p@"+ln.Addr().String()+"/mesh", strings.Repeat("ab", 32))); err == nil {
		t.Fatal("expected a silent peer to fail the dial")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("expected the dial to give up at the context's deadline, took %s", d)
	}
}

func TestBrokerErrorsAreMapped(t *testing.T) {
	denied := fmt.Errorf("channel shutdown error: %w", &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED - write access to topic 'sensor.alarm.cleared' refused"})
	if err := amqpconn.Refused(denied); !errors.Is(err, link.ErrDenied) {
		t.Fatalf("expected 403 to be ErrDenied, got %v", err)
	}
	notFound := &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no queue 'node-a.sensor.events'"}
	if err := amqpconn.Refused(notFound); errors.Is(err, link.ErrDenied) || amqpconn.BrokerCode(notFound) != wire.AMQPNotFound {
		t.Fatalf("expected 404 to stay itself, got %v", err)
	}
	if err := amqpconn.Refused(amqp.ErrClosed); !errors.Is(err, link.ErrClosed) || amqpconn.BrokerCode(amqp.ErrClosed) != 0 {
		t.Fatalf("expected a closed channel to be ErrClosed, got %v", err)
	}
	if wire.AMQPAccessRefused != amqp.AccessRefused || wire.AMQPNotFound != amqp.NotFound || wire.NoRespondersAMQP != amqp.NoRoute {
		t.Fatal("expected mesh/wire's reply codes to be amqp091's")
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := amqpconn.SendError(ended, ended.Err()); !errors.Is(err, link.ErrTimeout) {
		t.Fatalf("expected a publish the context ended to be ErrTimeout, got %v", err)
	}
	if err := amqpconn.SendError(context.Background(), denied); !errors.Is(err, link.ErrDenied) {
		t.Fatalf("expected a live publish's 403 to be ErrDenied, got %v", err)
	}
	closed := make(chan *amqp.Error, 1)
	if !errors.Is(amqpconn.CloseCause(closed), amqp.ErrClosed) {
		t.Fatal("expected a channel closed without a broker error to be ErrClosed")
	}
	closed <- notFound
	if amqpconn.CloseCause(closed) != notFound {
		t.Fatal("expected the broker's error")
	}
}

func TestDeliveryAsTheSDKSeesIt(t *testing.T) {
	d := delivery{d: amqp.Delivery{
		RoutingKey:  "sensor.alarm.raised",
		ContentType: wire.ContentTypeJSON,
		Headers:     amqp.Table{wire.HeaderEventID: "id-1", wire.AMQPDeliveryCount: int64(1)},
		Body:        []byte(`{"level":3}`),
	}}
	if d.Key() != "sensor.alarm.raised" {
		t.Fatalf("expected the routing key as the key, got %q", d.Key())
	}
	m := d.Message()
	if !slices.Equal(m.Header[wire.HeaderEventID], []string{"id-1"}) || !slices.Equal(m.Header[wire.HeaderContentType], []string{wire.ContentTypeJSON}) ||
		!slices.Equal(m.Header["x-delivery-count"], []string{"1"}) || string(m.Body) != `{"level":3}` {
		t.Fatalf("unexpected message %+v", m)
	}
	if (delivery{d: amqp.Delivery{RoutingKey: "sensor"}}).Key() != "" {
		t.Fatal("expected a routing key without an event key to give no key")
	}
	// Given back once before: this is the second delivery. The queue's
	// limit is not told to its consumers.
	if n, limit := d.Attempt(); n != 2 || limit != 0 {
		t.Fatalf("expected attempt 2 of an unknown limit, got %d of %d", n, limit)
	}
	if n, _ := (delivery{d: amqp.Delivery{}}).Attempt(); n != 1 {
		t.Fatalf("expected a first delivery (no x-delivery-count) to be attempt 1, got %d", n)
	}
}
