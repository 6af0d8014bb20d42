package steps

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

func (s *scenario) bindAccounts(sc *godog.ScenarioContext) {
	sc.Step(`^each of these users connects with the credential genesis wrote for it:$`, s.eachOfTheseUsersConnects)
	sc.Step(`^a user absent from the manifests is refused by the server$`, s.aUserAbsentIsRefused)
	sc.Step(`^a composed user presenting another's password is refused by the server$`, s.anotherPasswordIsRefused)
	sc.Step(`^for every user, the server refuses exactly what its composed grants do not allow, over every subject of the mesh$`, s.theServerEnforcesExactlyTheGrants)

	sc.Step(`^the module "([^"]+)" on "([^"]+)" is connected with its own credential$`, s.theModuleIsConnected)
	sc.Step(`^the person "([^"]+)" is connected with (?:her|his|their) own credential$`, s.thePersonIsConnected)
	sc.Step(`^it publishes on "([^"]+)"$`, s.itPublishesOn)
	sc.Step(`^it subscribes to "([^"]+)"$`, s.itSubscribesTo)
	sc.Step(`^it subscribes to its own inbox prefix$`, s.itSubscribesToItsOwnInbox)
	sc.Step(`^it subscribes to the inbox prefix of the module "([^"]+)" on "([^"]+)"$`, s.itSubscribesToTheModuleInbox)
	sc.Step(`^it subscribes to the inbox prefix of the person "([^"]+)"$`, s.itSubscribesToThePersonInbox)
	sc.Step(`^the server (accepts|refuses) the (publish|subscription)$`, s.theServerJudges)

	sc.Step(`^the module "([^"]+)" on "([^"]+)" has emitted the event "([^"]+)"$`, s.theModuleHasEmitted)
	sc.Step(`^the module "([^"]+)" on "([^"]+)" has fetched it from its consumer without acknowledging it$`, s.theModuleHasFetched)
	sc.Step(`^the module "([^"]+)" on "([^"]+)" acknowledges that delivery$`, s.theModuleAcknowledges)
	sc.Step(`^the delivery is still pending on the consumer "([^"]+)"$`, s.theDeliveryIsStillPending)
	sc.Step(`^nothing is pending on the consumer "([^"]+)"$`, s.nothingIsPending)

	sc.Step(`^the person "([^"]+)" is refused by the server$`, s.thePersonIsRefused)
	sc.Step(`^the open connection of "([^"]+)" has been closed by the server$`, s.theOpenConnectionWasClosed)
}

func (s *scenario) eachOfTheseUsersConnects(ctx context.Context, t *godog.Table) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	var listed, composed []string
	for _, row := range table(t) {
		listed = append(listed, row["user"])
	}
	for _, p := range compose.Principals(r.mesh) {
		composed = append(composed, p.User)
	}
	slices.Sort(listed)
	slices.Sort(composed)
	if !slices.Equal(listed, composed) {
		return fmt.Errorf("expected the table to list the users composed from the manifests %v, it lists %v", composed, listed)
	}
	for _, user := range listed {
		if _, err := s.connect(ctx, user); err != nil {
			return fmt.Errorf("expected %s to connect: %w", user, err)
		}
	}
	return nil
}

// withUser returns cred with the URL's user and password replaced.
func withUser(cred wire.Credential, user, password string) wire.Credential {
	u, err := url.Parse(cred.URL)
	if err != nil {
		return cred
	}
	u.User = url.UserPassword(user, password)
	cred.URL = u.String()
	return cred
}

func password(cred wire.Credential) string {
	u, err := url.Parse(cred.URL)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}

func (s *scenario) expectRefusedLogin(ctx context.Context, cred wire.Credential, who string) error {
	c, err := s.dial(ctx, cred)
	if err == nil {
		c.Close()
		return fmt.Errorf("expected the server to refuse %s, it accepted the connection", who)
	}
	if !isAuthorization(err) {
		return fmt.Errorf("expected an authorization violation for %s, got: %w", who, err)
	}
	return nil
}

func (s *scenario) aUserAbsentIsRefused(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	real, err := r.cluster.Credential(ctx, wire.ModuleUser("node-a", "sensor"))
	if err != nil {
		return err
	}
	intruder := wire.ModuleUser("node-a", "intruder")
	return s.expectRefusedLogin(ctx, withUser(real, intruder, password(real)), intruder)
}

func (s *scenario) anotherPasswordIsRefused(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	alice, err := r.cluster.Credential(ctx, wire.PersonUser("alice"))
	if err != nil {
		return err
	}
	bob, err := r.cluster.Credential(ctx, wire.PersonUser("bob"))
	if err != nil {
		return err
	}
	return s.expectRefusedLogin(ctx, withUser(alice, alice.User(), password(bob)), "alice with bob's password")
}

func (s *scenario) theServerEnforcesExactlyTheGrants(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	// Publishing every granted subject stores messages in the streams.
	r.tainted = true
	pub, sub := observe.Universe(r.mesh)
	var problems []string
	total := 0
	for _, p := range compose.Principals(r.mesh) {
		// A fresh connection per principal, so that earlier steps'
		// subscriptions do not count.
		cred, err := r.cluster.Credential(ctx, p.User)
		if err != nil {
			return err
		}
		c, err := s.dial(ctx, cred)
		if err != nil {
			return err
		}
		mismatches, n, err := observe.CheckGrants(ctx, c.Client, p, pub, sub)
		c.Close()
		if err != nil {
			return err
		}
		total += n
		for _, m := range mismatches {
			problems = append(problems, m.String())
		}
	}
	beds.Logf(ctx, "%d users × %d subjects: %d verdicts of the server compared with the composed grants", len(compose.Principals(r.mesh)), len(sub), total)
	return joinProblems(problems)
}

func (s *scenario) theModuleIsConnected(ctx context.Context, module, node string) error {
	c, err := s.connect(ctx, wire.ModuleUser(node, module))
	s.it = c
	return err
}

func (s *scenario) thePersonIsConnected(ctx context.Context, person string) error {
	c, err := s.connect(ctx, wire.PersonUser(person))
	s.it = c
	return err
}

// stored is how many messages a stream holds on one subject; stream is
// empty when no stream captures the subject.
type stored struct {
	account, stream string
	count           uint64
}

// storedEverywhere is what every stream capturing subject holds on it, in
// each account the controller keeps streams in: a publish refused in one
// account must not have landed in another either.
func (s *scenario) storedEverywhere(ctx context.Context, subject string) ([]stored, error) {
	var out []stored
	for _, acct := range []string{wire.AccountControl, wire.AccountMesh} {
		st, err := s.storedOn(ctx, acct, subject)
		if err != nil {
			return nil, err
		}
		if st.stream != "" {
			out = append(out, st)
		}
	}
	return out, nil
}

// storedOn asks the server which stream of account captures subject and
// how many messages it holds on it.
func (s *scenario) storedOn(ctx context.Context, account, subject string) (stored, error) {
	js, err := s.jetStream(ctx, account)
	if err != nil {
		return stored{}, err
	}
	got, err := observe.StoredOn(ctx, js, subject)
	return stored{account: account, stream: got.Stream, count: got.Count}, err
}

func (s *scenario) itPublishesOn(ctx context.Context, subject string) error {
	if s.it == nil {
		return errors.New("no principal connected (a Given step connects one)")
	}
	var err error
	if s.counted, err = s.storedEverywhere(ctx, subject); err != nil {
		return err
	}
	// A publish a stream keeps has no id (nothing stays in a duplicate
	// window): in the mesh's account a reset puts it back.
	for _, c := range s.counted {
		if c.account == wire.AccountMesh {
			s.touched.stored(c.stream)
		} else {
			s.r.tainted = true
		}
	}
	s.lastOp, s.lastSubject = observe.Publish, subject
	s.lastErr = s.it.Try(ctx, observe.Publish, subject)
	return nil
}

func (s *scenario) subscribe(ctx context.Context, subject string) error {
	if s.it == nil {
		return errors.New("no principal connected (a Given step connects one)")
	}
	s.lastOp, s.lastSubject = observe.Subscribe, subject
	s.lastErr = s.it.Try(ctx, observe.Subscribe, subject)
	return nil
}

func (s *scenario) itSubscribesTo(ctx context.Context, subject string) error {
	return s.subscribe(ctx, subject)
}

func (s *scenario) itSubscribesToItsOwnInbox(ctx context.Context) error {
	if s.it == nil {
		return errors.New("no principal connected (a Given step connects one)")
	}
	return s.subscribe(ctx, wire.Under(s.it.cred.Inbox()))
}

func (s *scenario) itSubscribesToTheModuleInbox(ctx context.Context, module, node string) error {
	return s.subscribe(ctx, wire.Under(wire.ModuleInbox(node, module)))
}

func (s *scenario) itSubscribesToThePersonInbox(ctx context.Context, person string) error {
	return s.subscribe(ctx, wire.Under(wire.PersonInbox(person)))
}

func (s *scenario) theServerJudges(ctx context.Context, verdict, what string) error {
	if want := map[string]observe.Op{"publish": observe.Publish, "subscription": observe.Subscribe}[what]; want != s.lastOp {
		return fmt.Errorf("the last operation was a %s, not a %s", s.lastOp, what)
	}
	refused := errors.Is(s.lastErr, observe.ErrRefused)
	if s.lastErr != nil && !refused {
		return fmt.Errorf("%s %q failed otherwise: %w", s.lastOp, s.lastSubject, s.lastErr)
	}
	switch {
	case verdict == "accepts" && refused:
		return fmt.Errorf("expected the server to accept %s %q, it refused it as a permissions violation", s.lastOp, s.lastSubject)
	case verdict == "refuses" && !refused:
		return fmt.Errorf("expected the server to refuse %s %q, it accepted it", s.lastOp, s.lastSubject)
	}
	if s.lastOp != observe.Publish || len(s.counted) == 0 {
		return nil
	}
	// A stream captures the subject: an accepted publish is stored in the
	// publisher's account, a refused one nowhere.
	return eventually(ctx, 5*time.Second, func(ctx context.Context) error {
		for _, before := range s.counted {
			want := before.count
			if verdict == "accepts" && before.account == s.it.cred.Account() {
				want++
			}
			now, err := s.storedOn(ctx, before.account, s.lastSubject)
			if err != nil {
				return err
			}
			if now.count != want {
				return fmt.Errorf("expected stream %s (account %s) to hold %d message(s) on %s, it holds %d", before.stream, before.account, want, s.lastSubject, now.count)
			}
		}
		return nil
	})
}

func (s *scenario) theModuleHasEmitted(ctx context.Context, module, node, key string) error {
	c, err := s.connect(ctx, wire.ModuleUser(node, module))
	if err != nil {
		return err
	}
	// The event's id is fresh, so a reset puts the stream back.
	s.touched.stored(wire.StreamEvents)
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	acked, err := observe.Emit(ctx, js, node, module, key, 1)
	if err != nil {
		return fmt.Errorf("emit %s.%s: %w", module, key, err)
	}
	s.emitted = &acked[0]
	return nil
}

func (s *scenario) theModuleHasFetched(ctx context.Context, module, node string) error {
	if s.emitted == nil {
		return errors.New("nothing was emitted in this scenario")
	}
	c, err := s.connect(ctx, wire.ModuleUser(node, module))
	if err != nil {
		return err
	}
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	s.touched.drove(wire.ModuleConsumer(node, module))
	got, err := observe.Fetch(ctx, js, wire.StreamEvents, wire.ModuleConsumer(node, module), 1, 10*time.Second)
	if err != nil {
		return err
	}
	if len(got) == 0 {
		return fmt.Errorf("expected a delivery on %s, none came", wire.ModuleConsumer(node, module))
	}
	if s.delivery = &got[0]; s.delivery.Seq != s.emitted.Seq {
		return fmt.Errorf("expected the delivery of stream sequence %d, got %d", s.emitted.Seq, s.delivery.Seq)
	}
	return nil
}

func (s *scenario) theModuleAcknowledges(ctx context.Context, module, node string) error {
	if s.delivery == nil {
		return errors.New("no delivery fetched in this scenario")
	}
	c, err := s.connect(ctx, wire.ModuleUser(node, module))
	if err != nil {
		return err
	}
	s.it = c
	// An ack is a publish of +ACK to the delivery's reply subject.
	s.lastOp, s.lastSubject = observe.Publish, s.delivery.Reply
	s.counted = nil
	s.lastErr = c.Try(ctx, observe.Publish, s.delivery.Reply)
	return nil
}

func (s *scenario) progress(ctx context.Context, consumer string) (observe.Progress, error) {
	js, err := s.streamJetStream(ctx, wire.StreamEvents)
	if err != nil {
		return observe.Progress{}, err
	}
	return observe.ProgressOn(ctx, js, wire.StreamEvents, consumer)
}

func (s *scenario) pending(ctx context.Context, consumer string) (observe.Pending, error) {
	js, err := s.streamJetStream(ctx, wire.StreamEvents)
	if err != nil {
		return observe.Pending{}, err
	}
	return observe.PendingOn(ctx, js, wire.StreamEvents, consumer)
}

func (s *scenario) theDeliveryIsStillPending(ctx context.Context, consumer string) error {
	p, err := s.pending(ctx, consumer)
	if err != nil {
		return err
	}
	if p.AckPending != 1 {
		return fmt.Errorf("expected the delivery to await its ack on %s, ack pending is %d", consumer, p.AckPending)
	}
	return nil
}

func (s *scenario) nothingIsPending(ctx context.Context, consumer string) error {
	return s.settledWithin(ctx, consumer, 5*time.Second)
}

// settledWithin waits until the consumer has delivered everything its
// stream holds for it and holds no delivery unacknowledged.
func (s *scenario) settledWithin(ctx context.Context, consumer string, within time.Duration) error {
	return eventually(ctx, within, func(ctx context.Context) error {
		p, err := s.pending(ctx, consumer)
		if err != nil {
			return err
		}
		if p.AckPending != 0 || p.Pending != 0 {
			return fmt.Errorf("expected nothing pending on %s, ack pending %d, pending %d", consumer, p.AckPending, p.Pending)
		}
		return nil
	})
}

func (s *scenario) thePersonIsRefused(ctx context.Context, person string) error {
	cred, ok := s.revoked[person]
	if !ok {
		return fmt.Errorf("no credential of %s was kept before the change", person)
	}
	return s.expectRefusedLogin(ctx, cred, person)
}

func (s *scenario) theOpenConnectionWasClosed(ctx context.Context, person string) error {
	user := wire.PersonUser(person)
	c, ok := s.clients[user]
	if !ok {
		return fmt.Errorf("%s has no open connection in this scenario", person)
	}
	if err := eventually(ctx, 5*time.Second, func(context.Context) error {
		if !c.IsClosed() {
			return fmt.Errorf("expected the connection of %s to be closed, it is %s", person, c.Status())
		}
		return nil
	}); err != nil {
		return err
	}
	// The client only sees its socket end; the server's monitoring says
	// it has no open connection of the user left and that it closed one.
	// (nats-server 2.15 records a revoked user's connection as "Client
	// Closed" when its users live in an account block; a refused login
	// is "Authentication Failure" and does not count.)
	open, err := s.connections(ctx, "open", user)
	if err != nil {
		return err
	}
	if len(open) > 0 {
		return fmt.Errorf("expected no open connection of %s on the server, it has %d", user, len(open))
	}
	closed, err := s.connections(ctx, "closed", user)
	if err != nil {
		return err
	}
	for _, reason := range closed {
		if reason != "Authentication Failure" {
			beds.Logf(ctx, "the server closed the connection of %s: %s", user, reason)
			return nil
		}
	}
	return fmt.Errorf("expected the server to have closed a connection of %s, its closed connections of that user say %q", user, closed)
}
