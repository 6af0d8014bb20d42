package observe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/meshbus/mesh/mesh/wire"
)

// Acked is one event a bed published and JetStream acknowledged.
type Acked struct {
	Seq uint64
	ID  string
}

// Emit publishes n events of module with key through JetStream as the
// connection behind js, one at a time, each a whole envelope with a fresh
// x-event-id (also its Nats-Msg-Id), and returns their acknowledgements
// in order. It stops at the first publish that is not acknowledged.
func Emit(ctx context.Context, js jetstream.JetStream, node, module, key string, n int) ([]Acked, error) {
	out := make([]Acked, 0, n)
	for i := range n {
		id := nuid.Next()
		m := nats.NewMsg(wire.EventSubject(module, key))
		m.Header.Set(wire.HeaderEventID, id)
		m.Header.Set(wire.HeaderSource, module)
		m.Header.Set(wire.HeaderNode, node)
		m.Header.Set(wire.HeaderTime, wire.FormatTime(time.Now()))
		m.Header.Set(wire.HeaderContentType, wire.ContentTypeJSON)
		m.Data = []byte(`{"n":` + strconv.Itoa(i) + `}`)
		ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(id))
		if err != nil {
			return out, fmt.Errorf("emit event %d of %d: %w", i+1, n, err)
		}
		out = append(out, Acked{Seq: ack.Sequence, ID: id})
	}
	return out, nil
}

// Survival is how what a stream holds compares with what JetStream
// acknowledged.
type Survival struct {
	// Acked is how many were acknowledged; Present how many of them the
	// stream holds, each at its acknowledged sequence with its own id.
	Acked, Present int
	// Missing are the sequences acknowledged and not held (or held with
	// another event); Duplicated the ids held at more than one sequence.
	Missing    []uint64
	Duplicated []string
	// Gaps are sequences between the first and the last acknowledged that
	// were never acknowledged: a publish that went nowhere, or a stream
	// that skipped.
	Gaps []uint64
}

// OK reports whether every acknowledged event is held, once, at
// contiguous sequences.
func (s Survival) OK() bool {
	return s.Present == s.Acked && len(s.Missing)+len(s.Duplicated)+len(s.Gaps) == 0
}

func (s Survival) String() string {
	return fmt.Sprintf("%d acknowledged, %d present, missing %v, duplicated %v, gaps %v", s.Acked, s.Present, s.Missing, s.Duplicated, s.Gaps)
}

// Survive reads back, from stream, every event of acked, and every
// message from the first acknowledged sequence to the stream's last, so
// that an event stored twice is seen wherever the second copy is.
func Survive(ctx context.Context, js jetstream.JetStream, stream string, acked []Acked) (Survival, error) {
	out := Survival{Acked: len(acked)}
	if len(acked) == 0 {
		return out, nil
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return Survival{}, fmt.Errorf("read stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return Survival{}, fmt.Errorf("read stream %s: %w", stream, err)
	}
	want := map[uint64]string{}
	ids := map[string]bool{}
	seqs := make([]uint64, 0, len(acked))
	for _, a := range acked {
		want[a.Seq] = a.ID
		ids[a.ID] = true
		seqs = append(seqs, a.Seq)
	}
	slices.Sort(seqs)
	held := map[string]int{}
	for seq := seqs[0]; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return Survival{}, fmt.Errorf("read %s sequence %d: %w", stream, seq, err)
		}
		id := m.Header.Get(wire.HeaderEventID)
		if ids[id] {
			held[id]++
		}
		if want[seq] != "" && want[seq] == id {
			out.Present++
			delete(want, seq)
		}
	}
	for seq := range want {
		out.Missing = append(out.Missing, seq)
	}
	slices.Sort(out.Missing)
	for id, n := range held {
		if n > 1 {
			out.Duplicated = append(out.Duplicated, id)
		}
	}
	slices.Sort(out.Duplicated)
	for i := 1; i < len(seqs); i++ {
		for g := seqs[i-1] + 1; g < seqs[i]; g++ {
			out.Gaps = append(out.Gaps, g)
		}
	}
	return out, nil
}

// Fetched is a delivery a consumer handed out: its stream sequence, how
// many times it has been delivered, and the subject its ack goes to.
type Fetched struct {
	Seq       uint64
	Delivered uint64
	Reply     string
}

// Fetch pulls up to n deliveries from consumer on stream, waiting at most
// wait, and acknowledges none of them.
func Fetch(ctx context.Context, js jetstream.JetStream, stream, consumer string, n int, wait time.Duration) ([]Fetched, error) {
	cons, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return nil, fmt.Errorf("bind consumer %s: %w", consumer, err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", consumer, err)
	}
	var out []Fetched
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			return nil, fmt.Errorf("a delivery of %s without metadata: %w", consumer, err)
		}
		out = append(out, Fetched{Seq: meta.Sequence.Stream, Delivered: meta.NumDelivered, Reply: msg.Reply()})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return out, fmt.Errorf("fetch from %s: %w", consumer, err)
	}
	return out, nil
}
