package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// Token lifetimes: DefaultTokenTTL unless the operator says otherwise,
// never longer than MaxTokenTTL (a token is a password for enrolling).
const (
	DefaultTokenTTL = 24 * time.Hour
	MaxTokenTTL     = 30 * 24 * time.Hour
)

// TokenScanEvery is how often the CONTROL loop reads the tokens by
// default, so that each is revoked at its expiry (scanTokens): one issued
// by another process (mesh-controller token issue) is seen within it.
const TokenScanEvery = 15 * time.Second

// tokenIDPrefix begins every token id the controller mints: a valid name
// (wire.CheckName) with 48 random bits after it.
const tokenIDPrefix = "tok-"

// IssueToken mints a one-time enrolment token for node, valid for ttl:
// it records the token, then composes its enrolment user into nats.conf
// through Apply (live through the watcher; the token's password is minted
// there, like any principal's) and returns the token and its credential
// document, which the operator hands to the node. A crash between the two
// leaves a token nobody holds, which the next apply gives a password and
// which expires unused.
func IssueToken(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir, node string, ttl time.Duration, o Options) (store.Token, []byte, error) {
	toks, docs, err := IssueTokens(ctx, m, st, dir, []string{node}, ttl, o)
	if err != nil {
		return store.Token{}, nil, err
	}
	return toks[0], docs[0], nil
}

// IssueTokens is IssueToken for several nodes at once: one update and one
// composition for all of them, as a fleet being raised needs.
func IssueTokens(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir string, nodes []string, ttl time.Duration, o Options) ([]store.Token, [][]byte, error) {
	o = o.WithDefaults()
	// The description in force: the one last pushed, if any.
	m, err := Described(ctx, m, st)
	if err != nil {
		return nil, nil, err
	}
	if ttl <= 0 || ttl > MaxTokenTTL {
		return nil, nil, fmt.Errorf("issue token: lifetime %s is outside (0, %s]", ttl, MaxTokenTTL)
	}
	now := o.Now()
	toks := make([]store.Token, 0, len(nodes))
	for _, node := range nodes {
		if !slices.ContainsFunc(m.Nodes, func(n meshdesc.Node) bool { return n.Name == node }) {
			return nil, nil, fmt.Errorf("issue token: no node %q in the description (its nodes: %v)", node, nodeNames(m))
		}
		raw := make([]byte, 6)
		if _, err := rand.Read(raw); err != nil {
			return nil, nil, fmt.Errorf("issue token: %w", err)
		}
		// The grace goes with the token (store.Token.Grace): every
		// process composing after keeps its user as long.
		toks = append(toks, store.Token{ID: tokenIDPrefix + hex.EncodeToString(raw), Node: node, Issued: now, Expires: now.Add(ttl), Grace: o.TokenGrace})
	}
	if err := st.Update(ctx, func(tx store.Tx) error {
		for _, t := range toks {
			if err := tx.PutToken(ctx, t); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("issue token: %w", err)
	}
	if _, err := Apply(ctx, m, st, dir, o); err != nil {
		// The tokens are kept (ErrNotLive: composed, and made live
		// later): named, so that their credentials can be read from the
		// store rather than lost with this error.
		ids := make([]string, len(toks))
		for i, t := range toks {
			ids[i] = t.ID
		}
		return nil, nil, fmt.Errorf("issue tokens %s: compose their users: %w", strings.Join(ids, ", "), err)
	}
	docs := make([][]byte, len(toks))
	for i, t := range toks {
		if docs[i], err = st.Credential(ctx, wire.EnrolUser(t.ID)); err != nil {
			return nil, nil, fmt.Errorf("issue token %s: %w", t.ID, err)
		}
		o.Logger.Info("token issued", "token", t.ID, "node", t.Node, "expires", t.Expires)
	}
	return toks, docs, nil
}

// withTokens is m with the tokens the store holds that may still be
// claimed at now, or were spent or expired less than grace before
// (store.Token.Composed): the description the server's users are composed
// from. A token's user past that is left out, and so revoked by the apply
// that composes without it.
func withTokens(m *meshdesc.Mesh, tokens []store.Token, now time.Time, grace time.Duration) *meshdesc.Mesh {
	out := *m
	out.Tokens = slices.Clone(m.Tokens)
	for _, t := range tokens {
		if t.Composed(now, grace) && !slices.ContainsFunc(out.Tokens, func(d meshdesc.Token) bool { return d.ID == t.ID }) {
			out.Tokens = append(out.Tokens, meshdesc.Token{ID: t.ID})
		}
	}
	return &out
}

func nodeNames(m *meshdesc.Mesh) []string {
	out := make([]string, len(m.Nodes))
	for i, n := range m.Nodes {
		out[i] = n.Name
	}
	return out
}
