package rollout

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// ErrNotReloadable refuses a change apply cannot make live: nats-server
// rejects a whole reload that touches its listeners, name or store
// (NATS-NOTES "Reload"), and a bus name the certificate does not carry
// would fail every client's name check.
var ErrNotReloadable = errors.New("change cannot be applied to a running bus")

// ApplyResult says what apply changed.
type ApplyResult struct {
	// Added are the users minted by this apply.
	Added []string `json:"added"`
	// Removed are the users revoked by this apply.
	Removed []string `json:"removed"`
	// ConfigChanged is true when nats.conf was rewritten.
	ConfigChanged bool `json:"config_changed"`
	// CredentialsWritten are the users whose credential file was written.
	CredentialsWritten []string `json:"credentials_written"`
}

// Apply recomposes the state after the description changed (the one in
// force, read inside its update: the last pushed, else m): the secrets
// of principals that still exist are kept, new principals are minted,
// removed ones are dropped with their credentials (every credential of a
// user not composed, whatever the old secrets say), and dir's nats.conf is
// replaced atomically, only if its content changed, so the nats
// container's watcher reloads exactly once per real change. The principals
// are the description's and the enrolment tokens the store holds that may
// still be claimed (IssueToken); a token spent or expired loses its user.
//
// The store's writes are one Update, made in an order that an interrupted
// apply is finished by running it again (a file store may be left with
// only the first of them done): the declaration key where a state from
// before signed declarations lacks it, the secrets, the credentials, the
// revocations; then nats.conf, last, since it makes the change live.
func Apply(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir string, o Options) (ApplyResult, error) {
	return applyWith(ctx, m, st, dir, o, nil)
}

// applyWith is Apply with change made to the store in the same update as
// the composition (a person issued or revoked): the change is never
// committed without the composition that makes it live, and an
// interruption before nats.conf is written leaves the store saying what
// to compose, which Apply run again writes.
func applyWith(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir string, o Options, change func(tx store.Tx) error) (ApplyResult, error) {
	o = o.WithDefaults()
	var res ApplyResult
	err := composing(ctx, dir, func() error {
		var a applied
		err := st.Update(ctx, func(tx store.Tx) error {
			if change != nil {
				if err := change(tx); err != nil {
					return err
				}
			}
			// The description in force, read under the lock: a caller that
			// read it before (a token or a person issued while a push was
			// being applied) would compose what the push replaced.
			m, err := Described(ctx, m, tx)
			if err != nil {
				return err
			}
			a, err = applyIn(ctx, tx, m, dir, o)
			return err
		})
		res = a.res
		if err != nil {
			return err
		}
		res, err = a.finish(ctx, dir, o)
		return err
	})
	return res, err
}

// composing runs fn, a composition (its update and its nats.conf), holding
// the state directory's composition lock: two compositions, of one
// process or of two (the controller's and a token issue's), never
// interleave, so the one committed last is the one written last. Without
// it an older composition could be written over a newer one and stay
// until the next.
func composing(ctx context.Context, dir string, fn func() error) error {
	f, ok, err := store.Lock(ctx, statedir.Layout{Dir: dir}.ComposeLock())
	if err != nil {
		return fmt.Errorf("compose: %w", err)
	}
	if ok {
		defer f.Close() // releases the flock
	}
	return fn()
}

// applied is what applyIn did inside its update, and what is left to do
// once it is committed: nats.conf, which makes the change live.
type applied struct {
	res    ApplyResult
	conf   []byte
	minted bool
	// live makes the broker's users and grants those of the store, on a
	// mesh on AMQP, once the update is committed.
	live func(ctx context.Context) error
	// seats are the servers adopted in place, whose configuration is
	// conf beside what they were raised with.
	seats []store.Seat
}

// applyIn is Apply's update, for an update that does more (a push).
func applyIn(ctx context.Context, tx store.Tx, m *meshdesc.Mesh, dir string, o Options) (applied, error) {
	l := statedir.Layout{Dir: dir}
	a := applied{res: ApplyResult{Added: []string{}, Removed: []string{}, CredentialsWritten: []string{}}}
	res := &a.res
	err := func() error {
		old, err := tx.Secrets(ctx)
		if err != nil {
			return err
		}
		// The tokens issued and not yet spent are users too.
		tokens, err := tx.Tokens(ctx)
		if err != nil {
			return err
		}
		m := withTokens(m, tokens, o.Now(), o.SpentTokenGrace)
		// And so are the persons issued.
		persons, err := tx.Persons(ctx)
		if err != nil {
			return err
		}
		if m, err = withPersons(m, persons); err != nil {
			return err
		}
		builds, err := tx.Builds(ctx)
		if err != nil {
			return err
		}
		if err := checkArtifacts(m, builds); err != nil {
			return err
		}
		bus, err := MeshBus(ctx, tx)
		if err != nil {
			return err
		}
		t, err := targetOf(m, bus, dir)
		if err != nil {
			return err
		}
		if bus == AMQP {
			// nats.conf is composed on either bus (a server adopted beside
			// the broker runs it); its certificate must fit it as well.
			if _, err := targetOf(m, NATS, dir); err != nil {
				return err
			}
		}
		declKey, err := tx.DeclarationKey(ctx)
		if errors.Is(err, store.ErrNotFound) {
			// A state raised before declarations were signed.
			if declKey, err = newDeclarationKey(); err == nil {
				err = tx.PutDeclarationKey(ctx, declKey)
				a.minted = err == nil
			}
		}
		if err != nil {
			return err
		}

		principals := compose.Principals(m)
		secrets := store.Secrets{}
		if sec, ok := old[wire.AMQPAdminUser]; ok {
			// Not a principal of the mesh: the broker's administrator,
			// minted at genesis, kept for as long as the store lives.
			secrets[wire.AMQPAdminUser] = sec
		}
		for _, p := range principals {
			if sec, ok := old[p.User]; ok {
				secrets[p.User] = sec
				continue
			}
			sec, err := MintSecret(o.BcryptCost)
			if err != nil {
				return err
			}
			secrets[p.User] = sec
			res.Added = append(res.Added, p.User)
		}
		// Removals are derived from the credentials held as well as from
		// the old secrets: an apply interrupted after it wrote the secrets
		// has already forgotten a revoked user's secret, but not yet its
		// credential.
		held, err := tx.Credentials(ctx)
		if err != nil {
			return err
		}
		for _, u := range slices.Sorted(maps.Keys(old)) {
			if _, ok := secrets[u]; !ok {
				res.Removed = append(res.Removed, u)
			}
		}
		for _, u := range held {
			if _, ok := secrets[u]; !ok && !slices.Contains(res.Removed, u) {
				res.Removed = append(res.Removed, u)
			}
		}
		slices.Sort(res.Removed)
		if a.conf, err = composeConfig(m, secrets, o); err != nil {
			return err
		}
		if err := checkReloadable(l.NATSConfig(), a.conf); err != nil {
			return err
		}
		docs := map[string][]byte{}
		for _, p := range principals {
			if docs[p.User], err = t.credentialDoc(p, secrets[p.User], declKey); err != nil {
				return err
			}
		}
		if a.seats, err = tx.Seats(ctx); err != nil {
			return err
		}
		for _, s := range a.seats {
			if s.Name == wire.BrokerSeat {
				if _, err := brokerModule(m); err != nil {
					// One server per mesh (ADR 0079): the adopted one holds it.
					return fmt.Errorf("%w: seat %s is held by the server %s at %s, adopted %s: %w",
						ErrUnfit, s.Name, s.ServerID, s.Server, s.Adopted.Format(time.RFC3339), err)
				}
			}
			if _, err := adoptedConfig(s, a.conf); err != nil {
				return fmt.Errorf("the server adopted into seat %s: %w", s.Name, err)
			}
		}
		if bus == AMQP {
			desired, err := amqpDefinitions(m, secrets)
			if err != nil {
				return err
			}
			a.live = func(ctx context.Context) error { return makeLive(ctx, m, secrets, desired, o) }
		}

		// Everything is composed and checked; only now is anything written.
		if err := tx.PutSecrets(ctx, secrets); err != nil {
			return err
		}
		written, err := tx.PutCredentials(ctx, docs)
		if err != nil {
			return err
		}
		res.CredentialsWritten = append(res.CredentialsWritten, written...)
		for _, u := range res.Removed {
			if err := tx.DeleteCredential(ctx, u); err != nil {
				return fmt.Errorf("revoke %s: %w", u, err)
			}
		}
		return nil
	}()
	return a, err
}

// finish writes nats.conf once the update is committed, and on a mesh on
// AMQP makes the broker's users and grants what the store says (an
// ErrNotLive if the broker does not take them: the store holds them, and
// the next composition or LiveAMQP makes them live).
func (a applied) finish(ctx context.Context, dir string, o Options) (ApplyResult, error) {
	l := statedir.Layout{Dir: dir}
	res := a.res
	var err error
	if a.minted {
		o.Logger.Info("declaration key minted")
	}
	if res.ConfigChanged, err = atomicfile.Write(l.NATSConfig(), a.conf, 0o644, o.syncDir); err != nil {
		return res, err
	}
	for _, s := range a.seats {
		// The mesh is on the broker: a server adopted beside it that does
		// not answer holds no composition up. The running controller
		// writes it once it does (KeepAdopted, every LiveEvery).
		if _, err := keepAdopted(ctx, s, a.conf, 30*time.Second, false, o); err != nil {
			o.Logger.Warn("the configuration of the server adopted into a seat is not written yet; the running controller writes it", "seat", s.Name, "err", err)
		}
	}
	if a.live != nil {
		if err := a.live(ctx); err != nil {
			return res, err
		}
	}
	for _, u := range res.Added {
		o.Logger.Info("user added", "user", u)
	}
	for _, u := range res.Removed {
		o.Logger.Info("user removed", "user", u)
	}
	o.Logger.Info("applied", "dir", dir, "added", len(res.Added), "removed", len(res.Removed), "config_changed", res.ConfigChanged)
	return res, nil
}

// ErrUnfit refuses a description the controller's state does not fit: an
// artifact no build produced, a person issued it no longer grants. The
// description may be valid on its own; the operator changes it, or the
// state (builds, persons), first.
var ErrUnfit = errors.New("the description does not fit the controller's state")

// checkArtifacts refuses a module to install an artifact no build of that
// module produced.
func checkArtifacts(m *meshdesc.Mesh, builds []store.Build) error {
	for i, mod := range m.Modules {
		if mod.Artifact == "" {
			continue
		}
		if b, ok := store.BuiltArtifact(builds, mod.Artifact); !ok || b.Module != mod.Name {
			var of []string
			for _, b := range builds {
				if b.Module == mod.Name && b.Outcome == wire.BuildSucceeded {
					of = append(of, b.Revision+" "+b.Digest)
				}
			}
			if len(of) == 0 {
				of = []string{"none"}
			}
			return fmt.Errorf("%w: modules[%d] %q.artifact %s: no build of %s produced it (built: %s)", ErrUnfit, i, mod.Name, mod.Artifact, mod.Name, strings.Join(of, ", "))
		}
	}
	return nil
}

// checkCertNames refuses bus names the server certificate does not carry:
// apply does not re-issue the certificate (that would change the pinned
// fingerprint of every credential in the mesh).
func checkCertNames(certPEM []byte, names []string, field string) error {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return fmt.Errorf("read server certificate: no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("read server certificate: %w", err)
	}
	for i, n := range names {
		if err := cert.VerifyHostname(n); err != nil {
			return fmt.Errorf("%w: %s[%d] %q is not in the server certificate (apply does not re-issue it)", ErrNotReloadable, field, i, n)
		}
	}
	return nil
}

// checkReloadable compares everything but the accounts (users and
// permissions, which reload) and TLS (which reloads for new handshakes)
// between the running configuration and the new one.
func checkReloadable(path string, conf []byte) error {
	oldData, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var was, now map[string]any
	if json.Unmarshal(oldData, &was) != nil {
		// Not ours (edited by hand in the server's own syntax): nothing to
		// compare against; the composed file replaces it.
		return nil
	}
	if err := json.Unmarshal(conf, &now); err != nil {
		return fmt.Errorf("read composed configuration: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if k == "accounts" || k == "tls" {
			continue
		}
		if !reflect.DeepEqual(was[k], now[k]) {
			return fmt.Errorf("%w: %s would change from %v to %v (nats-server cannot reload it; compose it once, at genesis)",
				ErrNotReloadable, k, was[k], now[k])
		}
	}
	return nil
}

// composedUsers are the users the configuration at path composes, in
// every account: what the server lets in once it has loaded it.
func composedUsers(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var conf struct {
		Accounts map[string]struct {
			Users []struct {
				User string `json:"user"`
			} `json:"users"`
		} `json:"accounts"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var out []string
	for _, a := range conf.Accounts {
		for _, u := range a.Users {
			out = append(out, u.User)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Described is the description the controller runs: the one last pushed,
// else m.
func Described(ctx context.Context, m *meshdesc.Mesh, st store.Reader) (*meshdesc.Mesh, error) {
	y, err := st.Description(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	pushed, err := meshdesc.Parse(y)
	if err != nil {
		return nil, fmt.Errorf("the description last pushed: %w", err)
	}
	return pushed, nil
}
