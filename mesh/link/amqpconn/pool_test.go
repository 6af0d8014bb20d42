package amqpconn

import (
	"context"
	"errors"
	"testing"

	"github.com/meshbus/mesh/mesh/link"
)

// fakeChannel stands for a channel in the pool's tests.
type fakeChannel struct {
	id     int
	dead   bool
	closed *[]int
}

func (f *fakeChannel) Alive() bool { return !f.dead }
func (f *fakeChannel) Close()      { *f.closed = append(*f.closed, f.id) }

func TestPoolReusesLiveChannelsOnly(t *testing.T) {
	var opened int
	var closed []int
	p := NewPool(func(context.Context) (*fakeChannel, error) {
		opened++
		return &fakeChannel{id: opened, closed: &closed}, nil
	})
	ctx := context.Background()
	a, _ := p.Get(ctx)
	b, _ := p.Get(ctx)
	if a.id != 1 || b.id != 2 {
		t.Fatalf("expected two channels opened for two concurrent calls, got %d and %d", a.id, b.id)
	}
	p.Put(a)
	b.dead = true
	p.Put(b) // a dead channel is not kept
	if again, _ := p.Get(ctx); again != a {
		t.Fatalf("expected the idle channel reused, got %d", again.id)
	}
	a.dead = true
	p.Put(a)
	if fresh, _ := p.Get(ctx); fresh.id != 3 {
		t.Fatalf("expected a fresh channel once the idle one died, got %d", fresh.id)
	}
	var many []*fakeChannel
	for range maxIdle + 2 {
		c, _ := p.Get(ctx)
		many = append(many, c)
	}
	closed = nil
	for _, c := range many {
		p.Put(c)
	}
	if len(closed) != 2 {
		t.Fatalf("expected %d idle channels kept and 2 closed, closed %v", maxIdle, closed)
	}
	closed = nil
	p.Close()
	if len(closed) != maxIdle {
		t.Fatalf("expected close to close the %d idle channels, closed %v", maxIdle, closed)
	}
	if _, err := p.Get(ctx); !errors.Is(err, link.ErrClosed) {
		t.Fatalf("expected ErrClosed from a closed pool, got %v", err)
	}
}
