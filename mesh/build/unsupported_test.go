package build_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/build"
	"github.com/meshbus/mesh/mesh/build/buildtest"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestAFlowTheBusDoesNotCarryEndsRun: on a bus that hands out a request
// but does not carry the fetch of a revision (AMQP today), Run gives the
// request back at once and returns an error naming the flow, rather than
// giving it back for ever.
func TestAFlowTheBusDoesNotCarryEndsRun(t *testing.T) {
	req := wire.BuildRequest{Repo: buildtest.Repo, Module: "sensor", Revision: "r1", Asked: time.Now().UTC()}
	req.ID = wire.BuildID(req.Repo, req.Module, req.Revision)
	msg := &heldMsg{data: wire.Marshal(req), held: -1}
	bus := &oneRequest{msg: msg}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := build.Run(ctx, build.Options{Bus: bus, Key: "pw", Toolchain: buildtest.Toolchain(t, program, "sensor"), Name: "a", Log: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, plane.ErrUnsupported) {
		t.Fatalf("expected Run to end with ErrUnsupported, got %v", err)
	}
	if msg.held != 0 || msg.acked || msg.termed {
		t.Fatalf("expected the request given back at once and nothing else, got held %v, acked %v, terminated %v", msg.held, msg.acked, msg.termed)
	}
}

// oneRequest hands out msg once, and carries no fetch.
type oneRequest struct {
	plane.Builder
	msg   *heldMsg
	given bool
}

func (b *oneRequest) NextBuild(ctx context.Context) (plane.BuildMsg, error) {
	if b.given {
		<-ctx.Done()
		return nil, nil
	}
	b.given = true
	return b.msg, nil
}

func (b *oneRequest) FetchRevision(context.Context, string, []byte) ([]byte, error) {
	return nil, fmt.Errorf("%w: fetching a revision", plane.ErrUnsupported)
}

// heldMsg records how it was settled; held is the delay it was given back
// with, -1 if it was not.
type heldMsg struct {
	data          []byte
	held          time.Duration
	acked, termed bool
}

func (m *heldMsg) ID() string                     { return "" }
func (m *heldMsg) Position() uint64               { return 0 }
func (m *heldMsg) Attempt() int                   { return 1 }
func (m *heldMsg) Data() []byte                   { return m.data }
func (m *heldMsg) Ack(context.Context) error      { m.acked = true; return nil }
func (m *heldMsg) Hold(delay time.Duration) error { m.held = delay; return nil }
func (m *heldMsg) Term(string) error              { m.termed = true; return nil }
