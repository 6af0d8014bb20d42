package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// Pushed is what one push came to.
type Pushed struct {
	Mesh *meshdesc.Mesh
	// Declared are every node's declarations as now held; Changed the
	// nodes whose declaration changed.
	Declared []wire.Declaration
	Changed  []string
	// Replayed: the ledger held the message already.
	Replayed bool
}

// Push applies an operator's push (ADR 0083): the description is
// validated whole, then its users and their credentials, the description
// itself, the nodes' declarations (a changed one at its next revision)
// and the message's ledger entry are committed in one update, or nothing
// changes. Once committed, nats.conf is written (the description's users
// live). A push that does not read, or whose description is refused, is
// ErrBadControl naming the entry; one already in the ledger is answered
// from the store and changes nothing.
func Push(ctx context.Context, st store.Store, dir, key string, data []byte, o Options) (Pushed, error) {
	o = o.WithDefaults()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p wire.Push
	if err := dec.Decode(&p); err != nil {
		return Pushed{}, fmt.Errorf("%w: a push: %v", ErrBadControl, err)
	}
	m, err := meshdesc.Parse([]byte(p.Mesh))
	if err != nil {
		return Pushed{}, fmt.Errorf("%w: the pushed description: %w", ErrBadControl, err)
	}
	out := Pushed{Mesh: m}
	var a applied
	err = composing(ctx, dir, func() error {
		err := st.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Applied(ctx, key); err == nil {
				out.Replayed = true
				y, err := tx.Description(ctx)
				if err != nil {
					return err
				}
				if out.Mesh, err = meshdesc.Parse(y); err != nil {
					return err
				}
				out.Declared, err = tx.Declared(ctx)
				return err
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if a, err = applyIn(ctx, tx, m, dir, o); err != nil {
				return err
			}
			if out.Declared, out.Changed, err = Declare(ctx, tx, m); err != nil {
				return err
			}
			return errors.Join(tx.PutDescription(ctx, []byte(p.Mesh)), tx.PutApplied(ctx, store.Applied{Key: key, At: o.Now()}))
		})
		if err != nil || out.Replayed {
			return err
		}
		_, err = a.finish(ctx, dir, o)
		return err
	})
	switch {
	case errors.Is(err, ErrNotReloadable), errors.Is(err, ErrUnfit):
		return Pushed{}, fmt.Errorf("%w: %w", ErrBadControl, err)
	case err != nil:
		return Pushed{}, err
	}
	if out.Replayed {
		// Composed again from what the push left, in case a crash came
		// before nats.conf was written.
		_, err := Apply(ctx, out.Mesh, st, dir, o)
		return out, err
	}
	o.Logger.Info("pushed", "nodes", len(out.Declared), "changed", out.Changed)
	return out, nil
}

// SendPush publishes the description yaml as a push on CONTROL, as the
// controller's own user (its credential from st), once it is valid: a
// description that is not is refused here, naming the entry, and nothing
// is sent. It returns once CONTROL holds the push, with its sequence; the
// running controller applies it (Push), also after its store was away.
func SendPush(ctx context.Context, st store.Store, yaml []byte, opts ...link.Option) (uint64, error) {
	if _, err := meshdesc.Parse(yaml); err != nil {
		return 0, err
	}
	cred, err := store.ControllerCredential(ctx, st, wire.ControllerUser)
	if err != nil {
		return 0, err
	}
	p, err := buses.DialPusher(ctx, cred, opts...)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	body, _ := json.Marshal(wire.Push{Mesh: string(yaml)})
	return p.Push(ctx, wire.NewID(), body)
}

// ErrBadControl is wrapped by a CONTROL message that cannot be read: no
// delivery of it will read better, so it is terminated and counted.
var ErrBadControl = errors.New("unreadable CONTROL message")
