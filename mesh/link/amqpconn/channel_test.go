package amqpconn_test

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestAChannelCloseTheBrokerNeverAnswersIsBounded: the real broker,
// reached through a proxy that stops passing the client's bytes on (a
// broker that stopped reading the connection, as under a resource
// alarm). amqp091's own Close would wait for close-ok for ever; ours
// gives up within its bound, closes the connection under it, and the
// Conn dials again, so the next channel opens.
func TestAChannelCloseTheBrokerNeverAnswersIsBounded(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	br := amqptest.Start(t, m)
	p := startProxy(t, br.Addr())

	const bound = time.Second
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := amqpconn.Dial(ctx, br.Creds[wire.ModuleUser("node-a", "sensor")], amqpconn.Options{Timeout: bound, Address: p.addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(time.Now().Add(bound), nil)
	ch, err := c.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// amqp091's own close waits, as the goroutine dump showed; ours, the
	// second close, as Bounded's and a deferred one were there, does not.
	p.freeze()
	theirs := make(chan error, 1)
	go func() { theirs <- ch.Channel.Close() }()
	select {
	case err := <-theirs:
		t.Fatalf("expected amqp091's close to wait for a close-ok the broker never sends, it returned %v", err)
	case <-time.After(2 * bound):
	}
	start := time.Now()
	err = ch.Close()
	if took := time.Since(start); took > 4*bound {
		t.Fatalf("expected the close given up within its bound (%s) and the connection's, it took %s", bound, took)
	}
	if !errors.Is(err, link.ErrTimeout) {
		t.Fatalf("expected link.ErrTimeout from a close the broker never answered, got %v", err)
	}
	select {
	case <-theirs:
	case <-time.After(2 * bound):
		t.Fatal("expected amqp091's close to end once the connection under it was closed")
	}

	p.thaw()
	next, err := c.Channel(ctx)
	if err != nil {
		t.Fatalf("expected the Conn to dial again and open the next channel, got %v", err)
	}
	if err := next.Close(); err != nil {
		t.Fatalf("expected an answered close to succeed, got %v", err)
	}
}

// proxy passes TCP connections on to a broker; frozen, it stops passing
// on what the clients of the connections open now send.
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	frozen chan struct{} // closed by thaw; nil while passing on
}

func startProxy(t *testing.T, to string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			broker, err := net.Dial("tcp", to)
			if err != nil {
				_ = client.Close()
				continue
			}
			t.Cleanup(func() { _ = client.Close(); _ = broker.Close() })
			go func() { _, _ = io.Copy(client, broker) }()
			go p.pass(broker, client)
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// pass copies from client to broker, holding what it read while frozen
// (the connections open then stay held after a thaw).
func (p *proxy) pass(broker, client net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		p.mu.Lock()
		held := p.frozen
		p.mu.Unlock()
		if held != nil {
			<-held
			return // the connection stays silent: the broker never hears it again
		}
		if n > 0 {
			if _, werr := broker.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = make(chan struct{})
}

func (p *proxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.frozen)
	p.frozen = nil
}
