package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe/amqproutes"
)

// The control plane's isolation on AMQP (issue 19 item 4, decision 0009):
// every principal's credential tries every route into the control plane's
// queues; the broker's answers and its own counts are the evidence. The
// routes are package amqproutes's, which internal/amqptest's
// TestAMQPIsolation tries too.

// isolation is what the principals' tries came to.
type isolation struct {
	reports []amqproutes.Report
}

func (s *scenario) bindAMQPIsolation(sc *godog.ScenarioContext) {
	sc.Step(`^each of these principals tries every route into the control plane with its own AMQP credential:$`, s.eachPrincipalTriesEveryRoute)
	sc.Step(`^the broker answered each route as decision 0009 says:$`, s.theBrokerAnsweredEachRoute)
	sc.Step(`^each principal's own messages were counted by the broker in the queues they belong to$`, s.ownMessagesWereCounted)
	sc.Step(`^after the other routes every queue of the control plane held just the controller's one message, as the broker counts them$`, s.nothingLandedNothingRead)
}

// principalUser is the broker user of a row: its kind and who it is
// ("sensor on node-a" for a module, a node for a host, a name otherwise).
func principalUser(kind, who string) (string, error) {
	switch amqproutes.Kind(kind) {
	case amqproutes.KindModule:
		module, node, ok := strings.Cut(who, " on ")
		if !ok {
			return "", fmt.Errorf("a module is written %q, got %q", "<module> on <node>", who)
		}
		return wire.ModuleUser(node, module), nil
	case amqproutes.KindPerson:
		return wire.PersonUser(who), nil
	case amqproutes.KindHost:
		return wire.HostUser(who), nil
	case amqproutes.KindToken:
		return wire.EnrolUser(who), nil
	case amqproutes.KindBuilder:
		return wire.BuilderUser, nil
	case amqproutes.KindSource:
		return wire.SourceUser(who), nil
	}
	return "", fmt.Errorf("no principal of kind %q", kind)
}

func (s *scenario) eachPrincipalTriesEveryRoute(ctx context.Context, table *godog.Table) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	if r.amqp == nil {
		return errors.New("no AMQP bus raised in this scenario")
	}
	all := amqproutes.Principals(r.mesh)
	var rows []amqproutes.Principal
	for i, row := range table.Rows {
		if i == 0 {
			continue // the header
		}
		if len(row.Cells) != 2 {
			return fmt.Errorf("row %d: expected | principal | who |, got %d cells", i, len(row.Cells))
		}
		user, err := principalUser(row.Cells[0].Value, row.Cells[1].Value)
		if err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		p, ok := amqproutes.Find(all, user)
		if !ok {
			return fmt.Errorf("row %d: the description has no principal %s", i, user)
		}
		rows = append(rows, p)
	}
	// Every principal's credential, none left out.
	for _, p := range all {
		if !slices.ContainsFunc(rows, func(q amqproutes.Principal) bool { return q.User == p.User }) {
			return fmt.Errorf("the table leaves out the %s %s; expected every principal of the description", p.Kind, p.User)
		}
	}

	addr, err := r.amqp.Address(ctx)
	if err != nil {
		return err
	}
	dial := amqproutes.CredentialDialer(r.amqp.Credential, addr)
	ctl, err := dial(ctx, wire.ControllerUser, wire.AMQPControlVhost)
	if err != nil {
		return fmt.Errorf("the controller logs in to the control plane: %w", err)
	}
	defer ctl.Close()
	queues, err := r.amqp.Queues(ctx, wire.AMQPControlVhost)
	if err != nil {
		return err
	}
	keys, err := r.amqp.BindingKeys(ctx, wire.AMQPControlVhost, wire.ExchangeControl)
	if err != nil {
		return err
	}
	if len(queues) == 0 || len(keys) == 0 {
		return fmt.Errorf("expected the control plane's queues and bindings on the broker, got %d queues and %d keys", len(queues), len(keys))
	}
	plane := amqproutes.NewPlane(queues, keys)
	s.iso = isolation{}
	for _, p := range rows {
		// The user-id it claims: a host's, not its own.
		other := ""
		for _, h := range all {
			if h.Kind == amqproutes.KindHost && h.User != p.User {
				other = h.User
				break
			}
		}
		rep, err := amqproutes.Check(ctx, dial, ctl, p, plane, other)
		s.iso.reports = append(s.iso.reports, rep)
		if err != nil {
			// What the broker did before the tries broke off says why.
			var seen []string
			for _, e := range rep.Errs() {
				seen = append(seen, e.Error())
			}
			if j := joinErrs(seen); j != nil {
				return fmt.Errorf("%w\nbefore that, %v", err, j)
			}
			return err
		}
	}
	return nil
}

func (s *scenario) theBrokerAnsweredEachRoute(table *godog.Table) error {
	if len(s.iso.reports) == 0 {
		return errors.New("no principal has tried the routes in this scenario")
	}
	answers := map[string]string{}
	for i, row := range table.Rows {
		if i == 0 {
			continue
		}
		if len(row.Cells) != 2 {
			return fmt.Errorf("row %d: expected | route | answer |, got %d cells", i, len(row.Cells))
		}
		answers[row.Cells[0].Value] = row.Cells[1].Value
	}
	tried := map[string]int{}
	var errs []string
	for _, rep := range s.iso.reports {
		for _, a := range rep.Attempts {
			want, ok := answers[a.Route]
			if !ok {
				return fmt.Errorf("the route %q (tried by %s) is not in the table", a.Route, a.User)
			}
			// The table and the package's expectations are one
			// specification; a difference is a mistake in one of them.
			if a.Want.String() != want {
				return fmt.Errorf("the route %q: the table says %q, package amqproutes expects %q", a.Route, want, a.Want)
			}
			tried[a.Route]++
			if got := a.Got.String(); got != want {
				errs = append(errs, fmt.Sprintf("%s (%s): %s %q: expected %s, got %s", a.User, a.Kind, a.Route, a.Target, want, got))
			}
		}
	}
	for route := range answers {
		if tried[route] == 0 {
			errs = append(errs, fmt.Sprintf("the route %q: expected it tried, nobody tried it", route))
		}
	}
	return joinErrs(errs)
}

func (s *scenario) ownMessagesWereCounted() error {
	var errs []string
	for _, rep := range s.iso.reports {
		if rep.Rightful != nil {
			errs = append(errs, fmt.Sprintf("%s (%s): %v", rep.Principal.User, rep.Principal.Kind, rep.Rightful))
		}
	}
	return joinErrs(errs)
}

func (s *scenario) nothingLandedNothingRead() error {
	if len(s.iso.reports) == 0 {
		return errors.New("no principal has tried the routes in this scenario")
	}
	var errs []string
	for _, rep := range s.iso.reports {
		if rep.Landed != nil {
			errs = append(errs, fmt.Sprintf("after the routes of %s (%s): %v", rep.Principal.User, rep.Principal.Kind, rep.Landed))
		}
	}
	return joinErrs(errs)
}

// joinErrs is nil for none, else the first 20 and how many more.
func joinErrs(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	const shown = 20
	n, more := len(errs), ""
	if len(errs) > shown {
		more = fmt.Sprintf("\n… and %d more", len(errs)-shown)
		errs = errs[:shown]
	}
	return fmt.Errorf("%d failed:\n%s%s", n, strings.Join(errs, "\n"), more)
}
