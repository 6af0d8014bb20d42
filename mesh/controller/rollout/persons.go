package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// ErrPerson is wrapped by every refusal of a person issue or revoke the
// operator can correct.
var ErrPerson = errors.New("person refused")

// IssuePerson issues person name a user that may call tools (store.Admin for an
// administrator), composes it into nats.conf at once (live through the
// watcher), and returns its credential document sealed to sealingKey (a
// public key, seal.EncodePublic), as wire.SealedCredential. Issuing a
// person again replaces its grant and key and mints it a new password:
// the credential issued before stops working, and the server closes its
// connections. A grant naming a tool no manifest declares, or the
// provisioner tools, is refused, naming the entry.
func IssuePerson(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir, name string, tools []string, sealingKey string, o Options) ([]byte, error) {
	o = o.WithDefaults()
	m, err := Described(ctx, m, st)
	if err != nil {
		return nil, err
	}
	if err := wire.CheckName(name); err != nil {
		return nil, fmt.Errorf("%w: name: %w", ErrPerson, err)
	}
	if slices.ContainsFunc(m.Persons, func(p meshdesc.Person) bool { return p.Name == name }) {
		return nil, fmt.Errorf("%w: person %q is in the mesh description; its grant is the description's (change it there and push)", ErrPerson, name)
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("%w: person %q: no tools: give the tools it may call, or make it an administrator", ErrPerson, name)
	}
	pub, err := seal.ParsePublic(sealingKey)
	if err != nil {
		return nil, fmt.Errorf("%w: the person's key: %w", ErrPerson, err)
	}
	p := store.Person{Name: name, Tools: slices.Clone(tools), SealingKey: sealingKey, Issued: o.Now().UTC()}
	if err := checkGrant(m, p); err != nil {
		return nil, err
	}
	// The person and its user are made in one update, composed at once.
	if _, err := applyWith(ctx, m, st, dir, o, func(tx store.Tx) error {
		if err := tx.PutPerson(ctx, p); err != nil {
			return err
		}
		// A new password: whoever held the credential issued before is
		// refused from now on.
		secrets, err := tx.Secrets(ctx)
		if err != nil {
			return err
		}
		if _, ok := secrets[wire.PersonUser(name)]; !ok {
			return nil
		}
		delete(secrets, wire.PersonUser(name))
		return tx.PutSecrets(ctx, secrets)
	}); err != nil {
		return nil, fmt.Errorf("issue person %s: %w", name, err)
	}
	doc, err := st.Credential(ctx, wire.PersonUser(name))
	if err != nil {
		return nil, fmt.Errorf("issue person %s: %w", name, err)
	}
	sealed, err := seal.To(pub, doc)
	if err != nil {
		return nil, fmt.Errorf("issue person %s: %w", name, err)
	}
	o.Logger.Info("person issued", "person", name, "tools", tools)
	return wire.SealedCredential{Person: name, Sealed: sealed}.Marshal(), nil
}

// RevokePerson removes a person issued: its user is composed out of
// nats.conf at once, and the server closes its open connections. The
// person is forgotten in the same store update that composes it out, and
// nats.conf is written from the store: a revoke interrupted before it
// said it was done (a kill, a store or disk failing) leaves the person's
// user in nats.conf, and running it again finishes it, whether the store
// still holds the person or not.
func RevokePerson(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir, name string, o Options) error {
	o = o.WithDefaults()
	m, err := Described(ctx, m, st)
	if err != nil {
		return err
	}
	persons, err := st.Persons(ctx)
	if err != nil {
		return err
	}
	user := wire.PersonUser(name)
	if !slices.ContainsFunc(persons, func(p store.Person) bool { return p.Name == name }) {
		if slices.ContainsFunc(m.Persons, func(p meshdesc.Person) bool { return p.Name == name }) {
			return fmt.Errorf("%w: person %q is in the mesh description: remove it there and push", ErrPerson, name)
		}
		// Forgotten by the store, but still composed: a revoke
		// interrupted after its update. The store says what to compose.
		composed, err := composedUsers(statedir.Layout{Dir: dir}.NATSConfig())
		if err != nil {
			return fmt.Errorf("revoke person %s: %w", name, err)
		}
		if !slices.Contains(composed, user) {
			return fmt.Errorf("%w: no person %q was issued (issued: %s)", ErrPerson, name, personNames(persons))
		}
		if _, err := Apply(ctx, m, st, dir, o); err != nil {
			return fmt.Errorf("revoke person %s: compose it out: %w", name, err)
		}
		o.Logger.Info("person revoked (an interrupted revoke finished)", "person", name)
		return nil
	}
	if _, err := applyWith(ctx, m, st, dir, o, func(tx store.Tx) error { return tx.DeletePerson(ctx, name) }); err != nil {
		return fmt.Errorf("revoke person %s: %w", name, err)
	}
	o.Logger.Info("person revoked", "person", name)
	return nil
}

// checkGrant refuses a person whose tools the description does not
// declare, with the description's own words for each entry.
func checkGrant(m *meshdesc.Mesh, p store.Person) error {
	probe := *m
	probe.Persons = append(slices.Clone(m.Persons), meshdesc.Person{Name: p.Name, Tools: p.Tools})
	if err := probe.Validate(); err != nil {
		return fmt.Errorf("%w: person %q's tools %v: %w", ErrPerson, p.Name, p.Tools, err)
	}
	return nil
}

// withPersons is m with the persons issued: the description the server's
// users are composed from. It refuses a description the persons issued
// no longer fit (a push that removes a tool a person may call, or that
// names a person already issued), naming them: such a push is refused
// whole, and the operator revokes or issues again first.
func withPersons(m *meshdesc.Mesh, persons []store.Person) (*meshdesc.Mesh, error) {
	if len(persons) == 0 {
		return m, nil
	}
	out := *m
	out.Persons = slices.Clone(m.Persons)
	for _, p := range persons {
		out.Persons = append(out.Persons, meshdesc.Person{Name: p.Name, Tools: p.Tools})
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("%w: the persons issued (%s) do not fit it; revoke or issue them again first: %w", ErrUnfit, personNames(persons), err)
	}
	return &out, nil
}

func personNames(persons []store.Person) string {
	if len(persons) == 0 {
		return "none"
	}
	names := make([]string, len(persons))
	for i, p := range persons {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// PersonsToIssueAgain are the persons issued before cutover c's switch.
// The switch moved every credential the store holds, but a person keeps
// the one sealed to it at issue, which names the bus the mesh moved from:
// each must be issued again (IssuePerson, with the tools and the key the
// store holds) to reach the mesh. None before a switch, nor after a
// cutover that stopped (it never switched).
func PersonsToIssueAgain(ctx context.Context, st store.Reader, c store.Cutover) ([]store.Person, error) {
	if c.Committed.IsZero() {
		return nil, nil
	}
	persons, err := st.Persons(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.Person
	for _, p := range persons {
		if p.Issued.Before(c.Committed) {
			out = append(out, p)
		}
	}
	return out, nil
}

// IssueAgainCommand is the command that issues p again as it was issued.
func IssueAgainCommand(p store.Person) string {
	grant := "--tools " + strings.Join(p.Tools, ",")
	if slices.Equal(p.Tools, store.Admin) {
		grant = "--admin"
	}
	return fmt.Sprintf("mesh-controller person issue %s %s --key %s", p.Name, grant, p.SealingKey)
}
