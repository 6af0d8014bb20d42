package linktest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// newestOnly: a node's host reads the newest declaration the controller
// keeps, read twice, after Set, across a reconnect and on a new
// connection, and never one older than one it read before (the host's
// rule "newest only, never go back" on the bus's part).
func newestOnly(t *testing.T, bus Bus) {
	c := bus.Controller()
	a, b := bus.Nodes()
	ctx := ctxT(t)
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(rev uint64) []plane.SignedDeclaration {
		body, sig, err := wire.SignDeclaration(key, wire.Declaration{Node: a, Revision: rev})
		if err != nil {
			t.Fatal(err)
		}
		return []plane.SignedDeclaration{{Node: a, Body: body, Signature: sig}}
	}
	k, err := c.Keep(ctx, sign(1))
	if err != nil {
		t.Fatalf("expected the declarations kept, got %v", err)
	}
	t.Cleanup(k.Stop)

	seen := uint64(0) // the newest revision read by any reader so far
	read := func(h plane.Host) (uint64, error) {
		rctx, cancel := timeout(t, 2*time.Second)
		defer cancel()
		d, err := h.Newest(rctx, a)
		if errors.Is(err, plane.ErrNoDeclaration) && seen > 0 {
			t.Fatalf("expected revision %d or newer, got no declaration (%v)", seen, err)
		}
		if err != nil {
			return 0, err
		}
		decl, err := wire.VerifyDeclaration(pub, wire.NodeDeclare(a), d.Body, d.Signature)
		if err != nil {
			t.Fatalf("expected a declaration as signed, got one that does not verify: %v", err)
		}
		if decl.Revision < seen {
			t.Fatalf("expected revision %d or newer, got %d after it", seen, decl.Revision)
		}
		seen = decl.Revision
		return decl.Revision, nil
	}
	await := func(h plane.Host, want uint64) {
		t.Helper()
		eventually(t, 20*time.Second, fmt.Sprintf("revision %d", want), func() (bool, string) {
			rev, err := read(h)
			if err != nil {
				return false, err.Error()
			}
			return rev == want, fmt.Sprintf("revision %d", rev)
		})
		if rev, err := read(h); err != nil || rev != want {
			t.Fatalf("expected revision %d read again, got %d (%v)", want, rev, err)
		}
	}

	h := bus.Host(a)
	await(h, 1)
	if _, err := bus.Host(b).Newest(ctx, b); !errors.Is(err, plane.ErrNoDeclaration) {
		t.Fatalf("expected no declaration for %s, which none was kept for, got %v", b, err)
	}
	for _, rev := range []uint64{2, 3} {
		if err := k.Set(ctx, sign(rev)); err != nil {
			t.Fatalf("expected revision %d set, got %v", rev, err)
		}
		await(h, rev)
	}
	if out, ok := bus.(Outage); ok {
		out.Away()
		out.Back()
		await(h, 3)
	} else {
		t.Log("no reconnect tried: the bus cannot be taken away and back (capability linktest.Outage)")
	}
	await(bus.Host(a), 3)
}

// credentialDesk: the desk is asked with the node the bus vouches for,
// and its answer goes to that node's host alone: a host asking as
// another node is answered with nothing of that node's.
func credentialDesk(t *testing.T, bus Bus) {
	c := bus.Controller()
	a, b := bus.Nodes()
	var mu sync.Mutex
	var asked []string
	stop, err := c.ServeCredentials(ctxT(t), func(_ context.Context, node string) []byte {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, node)
		return []byte("for " + node)
	})
	if err != nil {
		t.Fatalf("expected the desk served, got %v", err)
	}
	t.Cleanup(stop)
	answered := func(h plane.Host, node string) {
		t.Helper()
		eventually(t, 10*time.Second, "the answer for "+node, func() (bool, string) {
			rctx, cancel := timeout(t, time.Second)
			defer cancel()
			got, err := h.Credentials(rctx, node)
			if err != nil {
				return false, err.Error()
			}
			if string(got) != "for "+node {
				t.Fatalf("expected the answer for %s, got %q", node, got)
			}
			return true, ""
		})
	}
	ha := bus.Host(a)
	answered(ha, a)
	rctx, cancel := timeout(t, time.Second)
	got, err := ha.Credentials(rctx, b)
	cancel()
	if err == nil && !bytes.Equal(got, []byte("for "+a)) {
		t.Fatalf("expected %s's host answered as %s or not at all, got %q", a, a, got)
	}
	mu.Lock()
	if slices.Contains(asked, b) {
		t.Fatalf("expected the desk never asked for %s by %s's host, got asked for %v", b, a, asked)
	}
	mu.Unlock()
	answered(bus.Host(b), b)
}

// heartbeats: a heartbeat is heard with the node whose host sent it,
// never as another node; Connected says whether the controller is
// connected, following an outage.
func heartbeats(t *testing.T, bus Bus) {
	c := bus.Controller()
	a, b := bus.Nodes()
	h := bus.Host(a)
	type beat struct {
		node string
		body []byte
	}
	heard := make(chan beat, 1024)
	stop, err := c.Hear(ctxT(t), func(node string, body []byte) {
		select {
		case heard <- beat{node, body}:
		default:
		}
	})
	if err != nil {
		t.Fatalf("expected heartbeats heard, got %v", err)
	}
	t.Cleanup(stop)
	hears := func(what string) {
		t.Helper()
		body := alive(a)
		eventually(t, 20*time.Second, what, func() (bool, string) {
			// A heartbeat as another node first: the bus may refuse it
			// at once or drop it, and must not deliver it.
			_ = h.Alive(ctxT(t), b, alive(b))
			if err := h.Alive(ctxT(t), a, body); err != nil {
				return false, err.Error()
			}
			for {
				select {
				case got := <-heard:
					if got.node != a {
						t.Fatalf("expected heartbeats of %s only, heard one as %s: %s", a, got.node, got.body)
					}
					if bytes.Equal(got.body, body) {
						return true, ""
					}
				default:
					return false, "none heard"
				}
			}
		})
	}
	hears("a heartbeat of " + a + " heard")
	if !c.Connected() {
		t.Fatal("expected the controller connected, got not connected")
	}
	out, ok := bus.(Outage)
	if !ok {
		t.Log("Connected not followed through an outage: the bus cannot be taken away and back (capability linktest.Outage)")
		return
	}
	out.Away()
	eventually(t, 10*time.Second, "the controller not connected while the bus is away", func() (bool, string) {
		return !c.Connected(), "connected"
	})
	out.Back()
	eventually(t, 30*time.Second, "the controller connected once the bus is back", func() (bool, string) {
		return c.Connected(), "not connected"
	})
	hears("a heartbeat of " + a + " heard after the outage")
}
