package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// living is the living bed's state in a scenario (design 25 §10 step 4).
type living struct {
	// recorded is the store's row of a node as first read, by node.
	recorded map[string]observe.EnrolledNode
	// token is the enrolment token a step issued or presented last.
	token wire.Credential
	// tokenClient is the connection as that token's user.
	tokenClient *client
	// loginErr is what the server answered the last token's login.
	loginErr error
	// expiredBy is when the last token issued with a lifetime is past it
	// for certain: its lifetime after the issue returned.
	expiredBy time.Time
}

// claimWithin bounds a claim a step expects refused: at login, at once,
// or by the controller's answer.
const claimWithin = 15 * time.Second

func (s *scenario) bindLiving(sc *godog.ScenarioContext) {
	sc.Step(`^the server shows the host of "([^"]+)" connected as "([^"]+)" over TLS$`, s.theServerShowsTheHostConnected)
	sc.Step(`^the server shows no open connection of "([^"]+)"$`, s.theServerShowsNoConnection)
	sc.Step(`^the store records "([^"]+)" enrolled with the token the harness issued it$`, s.theStoreRecordsTheNode)
	sc.Step(`^the host of "([^"]+)" was connected as itself within (\d+) seconds of its token being issued$`, s.theEnrolmentTookAtMost)
	sc.Step(`^the controller issues a token for "([^"]+)" and its enrolment user connects with it$`, s.aFreshTokenConnects)
	sc.Step(`^the server refuses that enrolment user each of these:$`, s.theServerRefusesTheTokenUser)
	sc.Step(`^the server lets that enrolment user subscribe its own token's inbox$`, s.theTokenUserHasItsInbox)
	sc.Step(`^the token "([^"]+)" enrolled with is presented again, once its grace after the spend is over$`, s.theSpentTokenIsPresented)
	sc.Step(`^the server refuses its user's login$`, s.theServerRefusesTheLogin)
	sc.Step(`^a claim with it is refused by the server before it reaches the controller$`, s.aClaimIsRefused)
	sc.Step(`^the store still records "([^"]+)" enrolled once, as it first did$`, s.theStoreStillRecords)
	sc.Step(`^the controller issues a token for "([^"]+)" good for (\d+) seconds$`, s.aShortLivedToken)
	sc.Step(`^that token has expired$`, s.thatTokenHasExpired)
	sc.Step(`^a claim with it is answered by the controller with a refusal saying "([^"]+)"$`, s.aClaimIsAnsweredRefused)
	sc.Step(`^status counts that token's claim refused once, saying "([^"]+)"$`, s.statusCountsTheRefusal)
	sc.Step(`^within (\d+) seconds the module "([^"]+)" on "([^"]+)" has connected as itself, named "([^"]+)"$`, s.theModuleConnectedNamed)
	sc.Step(`^the server shows no connection named "([^"]+)", open or closed$`, s.noConnectionNamed)
}

// theModuleConnectedNamed: the server shows module's own user on node
// connected, with the name the module gives its connection.
func (s *scenario) theModuleConnectedNamed(ctx context.Context, seconds int, module, node, name string) error {
	user := wire.ModuleUser(node, module)
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		conns, err := s.openConnections(ctx)
		if err != nil {
			return err
		}
		named := observe.Named(conns, name)
		if len(named) != 1 || named[0].User != user {
			return fmt.Errorf("expected one open connection named %q, of %s; got %+v", name, user, named)
		}
		return nil
	})
}

// noConnectionNamed: the server lists no connection with that name, open
// or among those it closed (on AMQP, or refused).
func (s *scenario) noConnectionNamed(ctx context.Context, name string) error {
	conns, err := s.connectionsEver(ctx)
	if err != nil {
		return err
	}
	if named := observe.Named(conns, name); len(named) != 0 {
		return fmt.Errorf("expected no connection named %q, got %+v", name, named)
	}
	return nil
}

// connz are the connections the server lists in state (open, closed,
// all), asked from the private network.
func (s *scenario) connz(ctx context.Context, state string) ([]observe.Connection, error) {
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	body, err := s.monitor(ctx, observe.ConnzURL(r.mesh.Bus.Monitor, r.mesh.Bus.MonitorPort, state))
	if err != nil {
		return nil, err
	}
	return observe.Connections(body)
}

func (s *scenario) theServerShowsTheHostConnected(ctx context.Context, node, user string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	m, err := r.cluster.Member(node)
	if err != nil {
		return err
	}
	if st, err := m.Inspect(ctx); err != nil || !st.Running {
		return fmt.Errorf("expected the host container of %s running, got %+v (%v)", node, st, err)
	}
	// The host says it is ready once connected; the server is asked.
	return eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		got, err := s.openOverTLS(ctx, user)
		if err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("expected one open TLS connection of %s, got %d: %+v", user, len(got), got)
		}
		return nil
	})
}

func (s *scenario) theServerShowsNoConnection(ctx context.Context, user string) error {
	return eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		got, err := s.openOverTLS(ctx, user)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("expected no open connection of %s, got %+v", user, got)
		}
		return nil
	})
}

// openOverTLS are user's open TLS connections, as the mesh's bus lists
// them.
func (s *scenario) openOverTLS(ctx context.Context, user string) ([]observe.Connection, error) {
	conns, err := s.openConnections(ctx)
	if err != nil {
		return nil, err
	}
	return observe.OpenOverTLS(conns, user), nil
}

// recordedNodes reads the store's registry of nodes, in the store itself.
func (s *scenario) recordedNodes(ctx context.Context) (map[string]observe.EnrolledNode, error) {
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	st, err := capability[harness.StoreQuerier](r)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryStore(ctx, observe.EnrolledNodesSQL)
	if err != nil {
		return nil, err
	}
	return observe.EnrolledNodes(rows)
}

func (s *scenario) theStoreRecordsTheNode(ctx context.Context, node string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	e, err := r.cluster.Enrolment(node)
	if err != nil {
		return err
	}
	nodes, err := s.recordedNodes(ctx)
	if err != nil {
		return err
	}
	got, ok := nodes[node]
	if !ok || got.Token != e.Token.Name {
		return fmt.Errorf("expected the store to record %s enrolled with token %s, it records %+v", node, e.Token.Name, nodes)
	}
	if s.live.recorded == nil {
		s.live.recorded = map[string]observe.EnrolledNode{}
	}
	s.live.recorded[node] = got
	return nil
}

func (s *scenario) theEnrolmentTookAtMost(ctx context.Context, node string, seconds int) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	e, err := r.cluster.Enrolment(node)
	if err != nil {
		return err
	}
	took := e.Took()
	beds.Measure(ctx, "enrolment (token issued → host connected as itself)", took)
	beds.Logf(ctx, "%s: token %s issued, host connected as itself %s later", node, e.Token.Name, took.Round(time.Millisecond))
	if limit := time.Duration(seconds) * time.Second; took > limit {
		return fmt.Errorf("expected %s's host connected as itself within %s of its token being issued, it took %s", node, limit, took)
	}
	return nil
}

func (s *scenario) aFreshTokenConnects(ctx context.Context, node string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	// A token nobody claims stays a user of the server: later scenarios
	// get a cluster without it.
	r.tainted = true
	token, _, err := r.cluster.IssueToken(ctx, node)
	if err != nil {
		return err
	}
	s.live.token = token
	if s.onAMQP() {
		return s.tokenLogsInOnAMQP(ctx, token)
	}
	// Its user is live once the watcher has reloaded the server.
	return eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		c, err := s.dial(ctx, token)
		if err != nil {
			return fmt.Errorf("expected the new token's user %s to connect: %w", token.User(), err)
		}
		s.live.tokenClient = c
		s.clients[token.User()] = c
		return nil
	})
}

func (s *scenario) theServerRefusesTheTokenUser(ctx context.Context, t *godog.Table) error {
	c := s.live.tokenClient
	if c == nil {
		return errors.New("no enrolment user connected in this scenario")
	}
	var accepted []string
	for _, row := range table(t) {
		op := observe.Op(row["op"])
		if op != observe.Publish && op != observe.Subscribe {
			return fmt.Errorf("op %q: expected %s or %s", row["op"], observe.Publish, observe.Subscribe)
		}
		err := c.Try(ctx, op, row["subject"])
		switch {
		case errors.Is(err, observe.ErrRefused):
		case err != nil:
			return err
		default:
			accepted = append(accepted, string(op)+" "+row["subject"])
		}
	}
	if len(accepted) > 0 {
		return fmt.Errorf("expected the server to refuse %s all of these, it accepted: %v", c.cred.User(), accepted)
	}
	return nil
}

func (s *scenario) theTokenUserHasItsInbox(ctx context.Context) error {
	c := s.live.tokenClient
	if c == nil {
		return errors.New("no enrolment user connected in this scenario")
	}
	inbox := wire.EnrolInbox(s.live.token.Name) + ".answer"
	if err := c.Try(ctx, observe.Subscribe, inbox); err != nil {
		return fmt.Errorf("expected %s to subscribe its own inbox %s: %w", c.cred.User(), inbox, err)
	}
	return nil
}

func (s *scenario) theSpentTokenIsPresented(ctx context.Context, node string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	e, err := r.cluster.Enrolment(node)
	if err != nil {
		return err
	}
	s.live.token = e.Token
	// The spent token's user stays for its grace (the bed's, as the
	// harness issued it: token issue --grace) after the spend, which came
	// before the host was connected as itself; the composition after it
	// revokes the user, and the watcher reloads within its poll.
	if err := waitUntil(ctx, e.Ready.Add(r.cluster.TokenGrace())); err != nil {
		return err
	}
	return eventually(ctx, revokedWithin, func(ctx context.Context) error {
		c, err := s.dial(ctx, e.Token)
		if err == nil {
			c.Close()
		}
		s.live.loginErr = err
		if !observe.RefusedLogin(err) {
			return fmt.Errorf("expected %s's login refused once the token's grace was over, got %v", e.Token.User(), err)
		}
		return nil
	})
}

// revokedWithin bounds, past a spent token's grace, the composition that
// revokes its user (put off up to 10 s to be made once for several) and
// the watcher's reload.
const revokedWithin = 25 * time.Second

func (s *scenario) theServerRefusesTheLogin() error {
	if s.live.token.Name == "" {
		return errors.New("no token presented in this scenario")
	}
	if !observe.RefusedLogin(s.live.loginErr) {
		return fmt.Errorf("expected the server to refuse %s's login, got %v", s.live.token.User(), s.live.loginErr)
	}
	return nil
}

// claim claims the scenario's token from outside the mesh's network, as
// a node would, for at most claimWithin.
func (s *scenario) claim(ctx context.Context) (wire.Credential, error) {
	r, err := s.cluster()
	if err != nil {
		return wire.Credential{}, err
	}
	if s.live.token.Name == "" {
		return wire.Credential{}, errors.New("no token presented in this scenario")
	}
	addr, err := s.busAddress(ctx, r)
	if err != nil {
		return wire.Credential{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, claimWithin)
	defer cancel()
	return observe.Claim(ctx, s.live.token, addr)
}

func (s *scenario) aClaimIsRefused(ctx context.Context) error {
	cred, err := s.claim(ctx)
	if err == nil {
		return fmt.Errorf("expected the claim of spent token %s refused, it was answered with %s's credential", s.live.token.Name, cred.User())
	}
	if !observe.RefusedLogin(err) || !errors.Is(err, host.ErrNotSent) {
		return fmt.Errorf("expected the claim of spent token %s refused by the server at login, got %w", s.live.token.Name, err)
	}
	return nil
}

func (s *scenario) theStoreStillRecords(ctx context.Context, node string) error {
	first, ok := s.live.recorded[node]
	if !ok {
		return fmt.Errorf("no earlier reading of the store's record of %s", node)
	}
	nodes, err := s.recordedNodes(ctx)
	if err != nil {
		return err
	}
	if now := nodes[node]; now != first {
		return fmt.Errorf("expected the store's record of %s unchanged (%+v), it is %+v", node, first, now)
	}
	return nil
}

func (s *scenario) aShortLivedToken(ctx context.Context, node string, seconds int) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	// Its user stays in the server until a composition drops it: later
	// scenarios get a cluster without it.
	r.tainted = true
	ttl := time.Duration(seconds) * time.Second
	token, _, err := r.cluster.IssueTokenFor(ctx, node, ttl)
	if err != nil {
		return err
	}
	s.live.token, s.live.expiredBy = token, time.Now().Add(ttl)
	return nil
}

// thatTokenHasExpired waits for the instant the token is past its
// lifetime.
func (s *scenario) thatTokenHasExpired(ctx context.Context) error {
	if s.live.expiredBy.IsZero() {
		return errors.New("no token with a lifetime issued in this scenario")
	}
	return waitUntil(ctx, s.live.expiredBy)
}

func (s *scenario) aClaimIsAnsweredRefused(ctx context.Context, says string) error {
	cred, err := s.claim(ctx)
	switch {
	case err == nil:
		return fmt.Errorf("expected the claim of token %s refused, it was answered with %s's credential", s.live.token.Name, cred.User())
	case !errors.Is(err, host.ErrRefused):
		return fmt.Errorf("expected the controller to answer the claim of token %s with a refusal, got %w", s.live.token.Name, err)
	case !strings.Contains(err.Error(), says):
		return fmt.Errorf("expected the refusal to say %q, got %v", says, err)
	}
	return nil
}

func (s *scenario) statusCountsTheRefusal(ctx context.Context, says string) error {
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	var of []store.Refusal
	for _, x := range st.Refusals.Last {
		if x.Kind == store.RefusedEnrolment && strings.Contains(x.Reason, s.live.token.Name) {
			of = append(of, x)
		}
	}
	if len(of) != 1 || !strings.Contains(of[0].Reason, says) || st.Refusals.Counts[store.RefusedEnrolment] < 1 {
		return fmt.Errorf("expected status to count one enrolment refused for token %s, saying %q, got %+v", s.live.token.Name, says, st.Refusals)
	}
	return nil
}

// tokenLogsInOnAMQP: the token's user logs in to the broker (the
// controller made it live through the management API, its answer queue
// declared first); the connection is closed again, as nothing but the
// claim, which makes its own, is done with it.
func (s *scenario) tokenLogsInOnAMQP(ctx context.Context, token wire.Credential) error {
	b, err := s.broker()
	if err != nil {
		return err
	}
	addr, err := b.Address(ctx)
	if err != nil {
		return err
	}
	return eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		c, err := observe.DialAMQP(ctx, token, addr)
		if err != nil {
			return fmt.Errorf("expected the new token's user %s to log in to the broker: %w", token.User(), err)
		}
		return c.Close()
	})
}
