package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// announce tells the mesh that repo has revision of module, through
// JetStream into CONTROL, and returns the announcement once CONTROL has
// it. Its message id is wire.SourceChangeMsgID's, keyed with the
// repository's password (nc's): an announcement repeated within CONTROL's
// duplicate window (a commit retried after its acknowledgement was lost)
// is stored once, and no other principal can publish its id first.
func announce(ctx context.Context, nc *nats.Conn, repo, module, revision string, now time.Time) (wire.SourceChange, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return wire.SourceChange{}, err
	}
	change := wire.SourceChange{Repo: repo, Module: module, Revision: revision, At: now.UTC()}
	subject := wire.SourceChanged(repo)
	ack, err := js.Publish(ctx, subject, wire.Marshal(change),
		jetstream.WithMsgID(wire.SourceChangeMsgID(nc.Opts.Password, wire.BuildID(repo, module, revision))),
		jetstream.WithExpectStream(wire.StreamControl))
	if err != nil {
		return wire.SourceChange{}, fmt.Errorf("announce on %s: %w", subject, err)
	}
	if ack.Stream != wire.StreamControl {
		return wire.SourceChange{}, fmt.Errorf("announce on %s: acknowledged by stream %q, not %s", subject, ack.Stream, wire.StreamControl)
	}
	return change, nil
}
