package main

import (
	"context"
	"fmt"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// announce tells the mesh that repo has revision of module, into CONTROL,
// and returns the announcement once CONTROL has it. Its message id is
// wire.SourceChangeMsgID's, keyed with the repository's password (key):
// an announcement repeated (a commit retried after its acknowledgement
// was lost) is kept once, by CONTROL's duplicate window on NATS and the
// controller's ledger on either bus, and no other principal can send its
// id first.
func announce(ctx context.Context, bus plane.SourceAnnouncer, key, repo, module, revision string, now time.Time) (wire.SourceChange, error) {
	change := wire.SourceChange{Repo: repo, Module: module, Revision: revision, At: now.UTC()}
	id := wire.SourceChangeMsgID(key, wire.BuildID(repo, module, revision))
	if err := bus.Announce(ctx, repo, id, wire.Marshal(change)); err != nil {
		return wire.SourceChange{}, fmt.Errorf("announce on %s: %w", wire.SourceChanged(repo), err)
	}
	return change, nil
}
