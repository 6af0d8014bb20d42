package control

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// AskBuild takes a repository's announcement on subject: a revision of a
// module of the mesh, from a repository of the description, is recorded
// as a build asked for, once, with the message's ledger entry. It returns
// the build and whether it still waits for its outcome — the caller then
// sends its request to BUILDS (again, on a redelivery: the request's
// message id makes a second one a duplicate). An announcement of a
// revision already built is recorded and asks for nothing.
func AskBuild(ctx context.Context, st store.Store, m *meshdesc.Mesh, key, subject string, data []byte, o rollout.Options) (store.Build, bool, error) {
	o = o.WithDefaults()
	c, err := wire.ParseSourceChange(data)
	if err != nil {
		return store.Build{}, false, fmt.Errorf("%w: %w", rollout.ErrBadControl, err)
	}
	if subject != wire.SourceChanged(c.Repo) {
		// The subject is what the server let the publisher write.
		return store.Build{}, false, fmt.Errorf("%w: an announcement of repository %q on %s, which is not its subject", rollout.ErrBadControl, c.Repo, subject)
	}
	if !slices.ContainsFunc(m.Sources, func(s meshdesc.Source) bool { return s.Name == c.Repo }) {
		return store.Build{}, false, fmt.Errorf("%w: repository %q is not a source of the mesh description", rollout.ErrBadControl, c.Repo)
	}
	if _, ok := m.Module(c.Module); !ok {
		return store.Build{}, false, fmt.Errorf("%w: module %q of repository %q is not in the mesh description", rollout.ErrBadControl, c.Module, c.Repo)
	}
	id := wire.BuildID(c.Repo, c.Module, c.Revision)
	var b store.Build
	err = st.Update(ctx, func(tx store.Tx) error {
		builds, err := tx.Builds(ctx)
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(builds, func(b store.Build) bool { return b.ID == id }); i >= 0 {
			b = builds[i]
		} else {
			b = store.Build{ID: id, Repo: c.Repo, Module: c.Module, Revision: c.Revision, Asked: o.Now().UTC()}
			if err := tx.PutBuild(ctx, b); err != nil {
				return err
			}
		}
		if _, err := tx.Applied(ctx, key); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.PutApplied(ctx, store.Applied{Key: key, At: o.Now()})
	})
	if err != nil {
		return store.Build{}, false, err
	}
	return b, b.Outcome == "", nil
}

// RecordBuilt takes a builder's outcome: the build asked for is given it,
// once. A second outcome of the same build (a builder killed after it
// said, its request redelivered) changes nothing; an outcome of a build
// nobody asked for is refused.
func RecordBuilt(ctx context.Context, st store.Store, key string, data []byte, o rollout.Options) (store.Build, error) {
	o = o.WithDefaults()
	out, err := wire.ParseBuilt(data)
	if err != nil {
		return store.Build{}, fmt.Errorf("%w: %w", rollout.ErrBadControl, err)
	}
	var b store.Build
	err = st.Update(ctx, func(tx store.Tx) error {
		builds, err := tx.Builds(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(builds, func(b store.Build) bool { return b.ID == out.ID })
		if i < 0 {
			return fmt.Errorf("%w: an outcome of build %s, which was never asked for", rollout.ErrBadControl, out.ID)
		}
		b = builds[i]
		if _, err := tx.Applied(ctx, key); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if b.Outcome == "" {
			b.Outcome, b.Digest, b.Size, b.Chunks, b.Error, b.Builder, b.Built = out.Outcome, out.Digest, out.Size, out.Chunks, out.Error, out.Builder, out.At.UTC()
			if err := tx.PutBuild(ctx, b); err != nil {
				return err
			}
		}
		return tx.PutApplied(ctx, store.Applied{Key: key, At: o.Now()})
	})
	return b, err
}
