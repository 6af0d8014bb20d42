package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	meshclient "github.com/meshbus/mesh/mesh/client"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/modules/relay/call"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// persons is the state of a scenario whose persons call tools through
// the person's client (design 25 §7), from the test's machine through the
// bus's published port, as a workstation would.
type persons struct {
	// clients are the persons' clients, by person; creds their
	// credentials, issued or from the description.
	clients map[string]*meshclient.Client
	creds   map[string]wire.Credential
	// onAMQP are the persons' connections to the broker, on a mesh on
	// AMQP, by person.
	onAMQP map[string]link.Transport
	// relayed is the relay's last answer; answers the last calls' answers
	// and took how long each took; offered the tools a client offered.
	relayed call.Answer
	answers [][]byte
	took    []time.Duration
	offered []wire.ToolInfo
}

func (s *scenario) bindPersons(sc *godog.ScenarioContext) {
	sc.Step(`^the person "([^"]+)" asks "([^".]+)\.([^"]+)" to call "([^".]+)\.([^"]+)" with (\{.*\}) (\d+) times$`, s.aPersonAsksTheRelay)
	sc.Step(`^the relay's answer is "([^"]+)" after (\d+) calls, the last answering (\{.*\})$`, s.theRelayAnswered)
	sc.Step(`^the relay's answer is "([^"]+)" after (\d+) calls, within a second$`, s.theRelayRefused)
	sc.Step(`^the person "([^"]+)" asks her client for the mesh's tools$`, s.aPersonListsTools)
	sc.Step(`^her client offers exactly "([^"]+)", described as the catalogue says$`, s.theClientOffers)
	sc.Step(`^the person "([^"]+)" calls "([^"]+)" with (\{.*\}) (\d+) times through her client$`, s.aPersonCalls)
	sc.Step(`^the person "([^"]+)" calls "([^"]+)" with (\{.*\}) (\d+) times over the mesh's bus$`, s.aPersonCallsOverTheBus)
	sc.Step(`^every answer is (\{.*\})$`, s.everyAnswerIs)
	sc.Step(`^the person "([^"]+)" calling "([^"]+)" through her client is refused by the server$`, s.aPersonIsDenied)
	sc.Step(`^the controller issues the person "([^"]+)" the tools "([^"]+)", sealed to her own key$`, s.theControllerIssuesAPerson)
	sc.Step(`^the controller revokes the person "([^"]+)"$`, s.theControllerRevokesAPerson)
	sc.Step(`^the person "([^"]+)" calling "([^"]+)" through her client is refused at login, as revoked$`, s.aPersonIsRefusedAtLogin)
}

// personClient is person's client, opened once per scenario on the
// person's credential: the one the controller issued in this scenario, or
// the description's. Its URL names the bus as the test's machine reaches
// it, one of the names the server's certificate carries.
func (s *scenario) personClient(ctx context.Context, person string) (*meshclient.Client, error) {
	if c, ok := s.pp.clients[person]; ok {
		return c, nil
	}
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	cred, ok := s.pp.creds[person]
	if !ok {
		if cred, err = r.cluster.Credential(ctx, wire.PersonUser(person)); err != nil {
			return nil, err
		}
	}
	path, err := s.publishedCredential(ctx, r, cred)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := meshclient.Open(ctx, path, meshclient.WithLogger(slog.New(slog.DiscardHandler)), meshclient.WithTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	if s.pp.clients == nil {
		s.pp.clients = map[string]*meshclient.Client{}
	}
	s.pp.clients[person] = c
	s.cleanups = append(s.cleanups, func() { c.Close() })
	return c, nil
}

// aPersonAsksTheRelay has person call module's relay tool, asking it to
// call target's tool with args, times times, on its own account: through
// her client on NATS, through the broker on AMQP (aPersonCallsOverTheBus).
func (s *scenario) aPersonAsksTheRelay(ctx context.Context, person, module, tool, targetModule, targetTool, args string, times int) error {
	req, err := json.Marshal(call.Request{Module: targetModule, Tool: targetTool, Args: json.RawMessage(args), Times: times})
	if err != nil {
		return err
	}
	var out []byte
	if s.onAMQP() {
		var tr link.Transport
		if tr, err = s.personOnAMQP(ctx, person); err == nil {
			out, err = callServedOverAMQP(ctx, tr, module+"."+tool, req)
		}
	} else {
		var c *meshclient.Client
		if c, err = s.personClient(ctx, person); err == nil {
			out, err = callServed(ctx, c, module+"."+tool, req)
		}
	}
	if err != nil {
		return fmt.Errorf("%s asking %s.%s: %w", person, module, tool, err)
	}
	if err := json.Unmarshal(out, &s.pp.relayed); err != nil {
		return fmt.Errorf("the relay's answer %s: %w", out, err)
	}
	return nil
}

func (s *scenario) theRelayAnswered(ctx context.Context, outcome string, calls int, last string) error {
	a := s.pp.relayed
	if string(a.Outcome) != outcome || a.Calls != calls || !sameJSON(a.Answer, []byte(last)) {
		return fmt.Errorf("expected %s after %d calls answering %s, got %+v (answer %s)", outcome, calls, last, a, a.Answer)
	}
	us := time.Microsecond
	beds.Measure(ctx, fmt.Sprintf("tool call node→node (relay on node-b → sensor on node-a), median of %d", calls), time.Duration(a.Latency.MedianUS)*us)
	beds.Measure(ctx, fmt.Sprintf("tool call node→node, p99 of %d", calls), time.Duration(a.Latency.P99US)*us)
	return nil
}

// theRelayRefused: the relay's call was refused at once — by the
// server's own refusal (NATS's permissions violation, the broker's
// ACCESS_REFUSED on the channel), not by waiting out the call's timeout.
func (s *scenario) theRelayRefused(ctx context.Context, outcome string, calls int) error {
	a := s.pp.relayed
	if string(a.Outcome) != outcome || a.Calls != calls {
		return fmt.Errorf("expected %s after %d calls, got %+v", outcome, calls, a)
	}
	refusal := "permission"
	if s.onAMQP() {
		refusal = "access_refused"
	}
	if outcome == string(call.Denied) && !strings.Contains(strings.ToLower(a.Error), refusal) {
		return fmt.Errorf("expected the server's refusal (%s), the relay says %q", refusal, a.Error)
	}
	return nil
}

func (s *scenario) aPersonListsTools(ctx context.Context, person string) error {
	c, err := s.personClient(ctx, person)
	if err != nil {
		return err
	}
	s.pp.offered, err = c.Tools(ctx)
	return err
}

// theClientOffers compares what the client offers with the catalogue the
// mesh's manifests make, tool by tool.
func (s *scenario) theClientOffers(ctx context.Context, names string) error {
	want := strings.Split(names, ",")
	var got []string
	for _, t := range s.pp.offered {
		got = append(got, t.Name())
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("expected the client to offer %v, it offers %v", want, got)
	}
	catalogue := s.mesh().Catalogue()
	for _, t := range s.pp.offered {
		i := slices.IndexFunc(catalogue.Tools, func(c wire.ToolInfo) bool { return c.Name() == t.Name() })
		if i < 0 || catalogue.Tools[i].Description != t.Description || !sameJSON(catalogue.Tools[i].Args, t.Args) {
			return fmt.Errorf("%s is offered as %+v (%s), the manifests say otherwise", t.Name(), t, t.Args)
		}
	}
	return nil
}

// aPersonCalls calls name times times through person's client, one after
// another, keeping each answer and how long it took.
func (s *scenario) aPersonCalls(ctx context.Context, person, name, args string, times int) error {
	c, err := s.personClient(ctx, person)
	if err != nil {
		return err
	}
	call := func(ctx context.Context) ([]byte, error) { return c.Call(ctx, name, []byte(args)) }
	served := func(ctx context.Context) ([]byte, error) { return callServed(ctx, c, name, []byte(args)) }
	return s.timePersonCalls(ctx, person+"'s", name, times, served, call)
}

// timePersonCalls makes the first call with served, which waits for the
// tool to be served, then times times calls made with call (which find it
// served), keeping each answer and how long it took, and reports them.
func (s *scenario) timePersonCalls(ctx context.Context, whose, name string, times int, served, call func(context.Context) ([]byte, error)) error {
	s.pp.answers, s.pp.took = nil, nil
	if _, err := served(ctx); err != nil {
		return fmt.Errorf("%s first call of %s: %w", whose, name, err)
	}
	for i := range times {
		start := time.Now()
		// Bounded here as the first call is: the bed's context has a
		// deadline (the bed's timeout), so the client's own timeout does
		// not apply, and an answer lost on the way would hold the bed.
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		out, err := call(cctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s call %d of %s: %w", whose, i+1, name, err)
		}
		s.pp.took = append(s.pp.took, time.Since(start))
		s.pp.answers = append(s.pp.answers, out)
	}
	s.measurePersonCalls(ctx, times)
	return nil
}

// measurePersonCalls reports the median and p99 of the last calls' times,
// where there were enough of them for a p99 to mean something.
func (s *scenario) measurePersonCalls(ctx context.Context, times int) {
	if times < 100 {
		return
	}
	l := call.Summarize(s.pp.took)
	beds.Measure(ctx, fmt.Sprintf("tool call person→node (test host → sensor on node-a), median of %d", times), time.Duration(l.MedianUS)*time.Microsecond)
	beds.Measure(ctx, fmt.Sprintf("tool call person→node, p99 of %d", times), time.Duration(l.P99US)*time.Microsecond)
}

func (s *scenario) everyAnswerIs(ctx context.Context, want string) error {
	if len(s.pp.answers) == 0 {
		return errors.New("no answer to compare")
	}
	for i, a := range s.pp.answers {
		if !sameJSON(a, []byte(want)) {
			return fmt.Errorf("expected every answer %s, answer %d is %s", want, i+1, a)
		}
	}
	return nil
}

func (s *scenario) aPersonIsDenied(ctx context.Context, person, name string) error {
	c, err := s.personClient(ctx, person)
	if err != nil {
		return err
	}
	_, err = c.Call(ctx, name, []byte(`{}`))
	if !errors.Is(err, meshclient.KindDenied) {
		return fmt.Errorf("expected the server to refuse %s's call of %s, got %v", person, name, err)
	}
	return nil
}

// theControllerIssuesAPerson issues person the tools through
// mesh-controller person issue, sealed to a key the step makes, and opens
// what it printed with that key, as the person's client would.
func (s *scenario) theControllerIssuesAPerson(ctx context.Context, person, tools string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	r.tainted = true
	key, err := seal.NewKey()
	if err != nil {
		return err
	}
	doc, err := r.cluster.IssuePerson(ctx, person, strings.Split(tools, ","), false, seal.EncodePublic(key.Public))
	if err != nil {
		return err
	}
	sealed, err := wire.ParseSealedCredential(doc)
	if err != nil {
		return fmt.Errorf("what person issue printed: %w", err)
	}
	plain, err := key.Open(sealed.Sealed)
	if err != nil {
		return fmt.Errorf("the credential person issue printed does not open with the key given: %w", err)
	}
	cred, err := wire.ParseCredential(plain)
	if err != nil {
		return err
	}
	if cred.Name != person || cred.Principal != wire.PrincipalPerson {
		return fmt.Errorf("the credential issued for %s is %s's (%s)", person, cred.Name, cred.Principal)
	}
	if s.pp.creds == nil {
		s.pp.creds = map[string]wire.Credential{}
	}
	s.pp.creds[person] = cred
	// Its user is live once the watcher reloaded: the client connects
	// when it is.
	return eventually(ctx, 15*time.Second, func(ctx context.Context) error {
		_, err := s.personClient(ctx, person)
		return err
	})
}

func (s *scenario) theControllerRevokesAPerson(ctx context.Context, person string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	return r.cluster.RevokePerson(ctx, person)
}

// aPersonIsRefusedAtLogin: the client, its connection closed by the
// server, connects again and is refused the login.
func (s *scenario) aPersonIsRefusedAtLogin(ctx context.Context, person, name string) error {
	c, err := s.personClient(ctx, person)
	if err != nil {
		return err
	}
	return eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		_, err := c.Call(ctx, name, []byte(`{"to":1}`))
		if !errors.Is(err, meshclient.KindRefused) {
			return fmt.Errorf("expected %s's credential refused at login, got %v", person, err)
		}
		return nil
	})
}

// callServed calls name through c, asking again while nobody serves it
// yet, for up to 20 s: a module raised (or installed) by a push runs
// before it serves — its process starts once its declaration is applied,
// and connects once the server has loaded its user, starting again until
// it has.
func callServed(ctx context.Context, c *meshclient.Client, name string, args []byte) ([]byte, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		out, err := c.Call(cctx, name, args)
		cancel()
		if !errors.Is(err, meshclient.KindNoResponders) || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling, bounded by the deadline
		}
	}
}

// sameJSON compares two JSON documents by what they say.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
