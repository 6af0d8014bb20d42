package control

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// Enrolment is what one enrolment request came to: the answer, and where
// it goes (the request's own reply subject, under its token's inbox).
type Enrolment struct {
	// Token is the token claimed.
	Token  string
	Answer wire.EnrolAnswer
	Reply  string
	// Replayed: the ledger held the message already; Answer is the one
	// given then.
	Replayed bool
	// Leaves is when the spent token's user leaves the configuration
	// (store.Token.Leaves, its own grace after the spend); zero for a
	// refusal or a replay.
	Leaves time.Time
}

// Enrol applies one enrolment request (design 25 §6), keyed in the ledger
// by key (store.LedgerKey). In one Update it spends the token, records the node
// and its sealing key, gives the node's host user a new password and its
// credential, and enters the answer — the host credential sealed to the
// node's key, or the refusal — in the ledger. A message already in the
// ledger (a redelivery, a duplicate publish, a controller killed between
// commit and ack) is answered as it was then, and changes nothing; so is
// a claim of a spent token by the node that spent it, with the same
// sealing key (a node that asked again before the answer reached it).
// Once committed, the answer is handed to deliver. A deliver that fails
// is returned, and the message asked again and answered from the ledger.
//
// Enrol does not compose: the caller makes the node's user live (rollout.Apply)
// once the answer is delivered, for every enrolment whose Answer is not a
// refusal. The token's user stays composed for rollout.Options.SpentTokenGrace
// after the spend, so that no composition made meanwhile (another
// enrolment's, another process's) closes its connection before the answer
// has reached it; the composition after the grace revokes it.
//
// A refusal is counted in the store's Refusals with it (once: the ledger
// entry keeps a redelivery from counting it again).
//
// A request that cannot be read is rollout.ErrBadControl, and gets no answer: its
// reply subject is not known to be the requester's. A store that cannot
// take the update is an error wrapping store.ErrStoreUnavailable: nothing
// changed, and the same request may be applied later.
func Enrol(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir, key string, data []byte, o rollout.Options, deliver func(Enrolment) error) (Enrolment, error) {
	o = o.WithDefaults()
	req, err := wire.ParseEnrolRequest(data)
	if err != nil {
		return Enrolment{}, fmt.Errorf("%w: %w", rollout.ErrBadControl, err)
	}
	out := Enrolment{Token: req.Token, Reply: req.Reply}
	err = st.Update(ctx, func(tx store.Tx) error {
		if a, err := tx.Applied(ctx, key); err == nil {
			out.Replayed = true
			return json.Unmarshal(a.Outcome, &out.Answer)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		answer, err := enrol(ctx, tx, m, dir, req, o, &out.Leaves)
		if err != nil {
			return err
		}
		out.Answer = answer
		if answer.Refused != "" {
			if err := countRefusal(ctx, tx, store.Refusal{Kind: store.RefusedEnrolment, Key: key, At: o.Now(), Reason: answer.Refused}); err != nil {
				return err
			}
		}
		return tx.PutApplied(ctx, store.Applied{Key: key, At: o.Now(), Outcome: answer.Marshal()})
	})
	if err != nil {
		return Enrolment{}, err
	}
	if err := deliver(out); err != nil {
		return out, fmt.Errorf("answer the enrolment: %w", err)
	}
	if !out.Replayed {
		o.Logger.Info("enrolment", "token", req.Token, "node", out.Answer.Node, "refused", out.Answer.Refused)
	}
	return out, nil
}

// enrol is Enrol's one update: an answer, or an error that commits
// nothing. A claim that fails is an answer too (refused, with the
// reason), entered in the ledger like a success.
func enrol(ctx context.Context, tx store.Tx, m *meshdesc.Mesh, dir string, req wire.EnrolRequest, o rollout.Options, leaves *time.Time) (wire.EnrolAnswer, error) {
	refuse := func(format string, args ...any) (wire.EnrolAnswer, error) {
		return wire.EnrolAnswer{Refused: fmt.Sprintf(format, args...)}, nil
	}
	tokens, err := tx.Tokens(ctx)
	if err != nil {
		return wire.EnrolAnswer{}, err
	}
	i := slices.IndexFunc(tokens, func(t store.Token) bool { return t.ID == req.Token })
	if i < 0 {
		return refuse("token %s is unknown", req.Token)
	}
	t := tokens[i]
	now := o.Now()
	switch {
	case !t.Spent.IsZero():
		nodes, err := tx.Nodes(ctx)
		if err != nil {
			return wire.EnrolAnswer{}, err
		}
		if slices.ContainsFunc(nodes, func(n store.Node) bool { return n.Token == t.ID && n.SealingKey == req.SealingKey }) {
			// The node that spent it, asking again: its own answer, which
			// only its key opens.
			a, err := tx.Applied(ctx, enrolledKey(t.ID))
			if err != nil {
				return wire.EnrolAnswer{}, err
			}
			var answer wire.EnrolAnswer
			return answer, json.Unmarshal(a.Outcome, &answer)
		}
		return refuse("token %s was spent at %s", t.ID, t.Spent.UTC().Format(timeFormat))
	case !now.Before(t.Expires):
		return refuse("token %s expired at %s", t.ID, t.Expires.UTC().Format(timeFormat))
	}
	secrets, err := tx.Secrets(ctx)
	if err != nil {
		return wire.EnrolAnswer{}, err
	}
	sec, ok := secrets[wire.EnrolUser(t.ID)]
	if !ok || subtle.ConstantTimeCompare([]byte(sec.Password), []byte(req.Proof)) != 1 {
		return refuse("the proof is not token %s's", t.ID)
	}
	pub, err := seal.ParsePublic(req.SealingKey)
	if err != nil {
		return refuse("sealing key: %v", err)
	}
	principals := compose.Principals(m)
	p := slices.IndexFunc(principals, func(p compose.Principal) bool { return p.User == wire.HostUser(t.Node) })
	if p < 0 {
		return refuse("node %s is no longer in the description", t.Node)
	}

	// The node's user gets a password only this answer carries.
	hostSec, err := rollout.MintSecret(o.BcryptCost)
	if err != nil {
		return wire.EnrolAnswer{}, err
	}
	secrets[wire.HostUser(t.Node)] = hostSec
	// The token's own secret stays: its user is composed for its grace
	// (store.Token.Leaves), and the composition after it drops both.
	declKey, err := tx.DeclarationKey(ctx)
	if err != nil {
		return wire.EnrolAnswer{}, err
	}
	// On the bus the mesh is on (rollout.MeshBus): a node enrols onto it.
	doc, err := rollout.CredentialDoc(ctx, tx, m, dir, principals[p], hostSec, declKey)
	if err != nil {
		return wire.EnrolAnswer{}, err
	}
	sealed, err := seal.To(pub, doc)
	if err != nil {
		return wire.EnrolAnswer{}, err
	}
	t.Spent = now
	*leaves = t.Leaves(o.SpentTokenGrace)
	answer := wire.EnrolAnswer{Node: t.Node, Sealed: sealed}
	if err := errors.Join(
		tx.PutSecrets(ctx, secrets),
		tx.PutCredential(ctx, wire.HostUser(t.Node), doc),
		tx.PutToken(ctx, t),
		tx.PutNode(ctx, store.Node{Name: t.Node, SealingKey: req.SealingKey, Enrolled: now, Token: t.ID}),
		tx.PutApplied(ctx, store.Applied{Key: enrolledKey(t.ID), At: now, Outcome: answer.Marshal()}),
	); err != nil {
		return wire.EnrolAnswer{}, err
	}
	return answer, nil
}

// enrolledKey is the ledger's entry of the answer a token was spent with.
func enrolledKey(token string) string { return "enrolled:" + token }

// timeFormat is how a refusal spells a time.
const timeFormat = "2006-01-02T15:04:05Z"
