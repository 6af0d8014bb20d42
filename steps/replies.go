package steps

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// The reply subject is a capability nats-server never checks: these steps
// aim every principal's replies at the control plane (docs/decisions/0001).

func (s *scenario) bindReplies(sc *godog.ScenarioContext) {
	sc.Step(`^I note what the control plane's streams hold$`, s.iNoteTheControlPlane)
	sc.Step(`^the person "([^"]+)" calls "([^".]+)\.([^"]+)" with its reply aimed at each of the control plane's subjects$`, s.personCallsAimedAtControl)
	sc.Step(`^the person "([^"]+)" calls "([^".]+)\.([^"]+)" with its reply aimed at "([^"]+)"$`, s.personCallsAimedAt)
	sc.Step(`^the module "([^"]+)" on "([^"]+)" pulls from its consumer with its replies aimed at each of the control plane's subjects$`, s.moduleIsPullAimedAtControl)
	sc.Step(`^the module "([^"]+)" on "([^"]+)" pulls from its consumer with its replies aimed at "([^"]+)"$`, s.modulePullsAimedAt)
	sc.Step(`^the module "([^"]+)" on "([^"]+)" emits "([^"]+)" with its PubAck aimed at each of the control plane's subjects$`, s.moduleEmitsAimedAtControl)
	sc.Step(`^the enrolment token "([^"]+)" asks to enrol with its PubAck aimed at each of the control plane's subjects$`, s.tokenEnrolsAimedAtControl)
	sc.Step(`^the host of "([^"]+)" reports with its PubAck aimed at each of the control plane's subjects$`, s.hostReportsAimedAtControl)
	sc.Step(`^the repository "([^"]+)" announces with its PubAck aimed at each of the control plane's subjects$`, s.repositoryAnnouncesAimedAtControl)
	sc.Step(`^the control plane's streams hold what they held, but for the requests into CONTROL themselves$`, s.theControlPlaneIsUnchanged)
	sc.Step(`^the mesh's streams hold nothing on "([^"]+)"$`, s.theMeshHoldsNothingOn)
	sc.Step(`^within (\d+) seconds the controller has settled every message CONTROL held, and CONTROL holds none$`, s.theControllerSettledControl)
	sc.Step(`^the declaration NODES holds for "([^"]+)" is the controller's, as the node's own credential checks it$`, s.theDeclarationIsTheControllers)
}

// controlTargets are the subjects every route aims at.
var controlTargets = observe.ControlTargets("node-b")

func (s *scenario) controlJS(ctx context.Context) (jetstream.JetStream, error) {
	return s.jetStream(ctx, wire.AccountControl)
}

func (s *scenario) iNoteTheControlPlane(ctx context.Context) error {
	js, err := s.controlJS(ctx)
	if err != nil {
		return err
	}
	s.held, err = observe.Hold(ctx, js, observe.ControlStreams)
	return err
}

// aim publishes to subject as user once per target, each time naming the
// target as the reply subject, and flushes: whatever answers it does so
// to the target.
func (s *scenario) aim(ctx context.Context, user, subject string, body []byte, targets []string) error {
	c, err := s.connect(ctx, user)
	if err != nil {
		return err
	}
	for _, t := range targets {
		if err := c.PublishRequest(subject, t, body); err != nil {
			return fmt.Errorf("publish %s as %s with reply %s: %w", subject, user, t, err)
		}
	}
	return c.FlushWithContext(ctx)
}

func (s *scenario) personCallsAimedAtControl(ctx context.Context, person, module, tool string) error {
	return s.callAimed(ctx, person, module, tool, controlTargets)
}

func (s *scenario) personCallsAimedAt(ctx context.Context, person, module, tool, target string) error {
	return s.callAimed(ctx, person, module, tool, []string{target})
}

// callAimed makes the calls, then one ordinary call and waits for its
// answer: the responder answers one call at a time, in arrival order, so
// once it has answered that one it has done whatever it does with the
// others.
func (s *scenario) callAimed(ctx context.Context, person, module, tool string, targets []string) error {
	user, subject := wire.PersonUser(person), wire.ToolSubject(module, tool)
	if err := s.aim(ctx, user, subject, []byte(`{}`), targets); err != nil {
		return err
	}
	c, err := s.connect(ctx, user)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.RequestWithContext(ctx, subject, []byte(`{}`)); err != nil {
		return fmt.Errorf("an ordinary call of %s after the aimed ones: %w", subject, err)
	}
	return nil
}

// pulls are the pull requests the JetStream API answers on the reply:
// at once (no_wait), with idle heartbeats until it expires, and a
// consumer info.
func (s *scenario) pull(ctx context.Context, module, node string, targets []string) error {
	user, consumer := wire.ModuleUser(node, module), wire.ModuleConsumer(node, module)
	for _, r := range []struct {
		subject string
		body    string
	}{
		{wire.ConsumerNext(wire.StreamEvents, consumer), `{"batch":1,"no_wait":true}`},
		{wire.ConsumerNext(wire.StreamEvents, consumer), `{"batch":1,"expires":2000000000,"idle_heartbeat":200000000}`},
		{wire.ConsumerInfo(wire.StreamEvents, consumer), ``},
	} {
		if err := s.aim(ctx, user, r.subject, []byte(r.body), targets); err != nil {
			return err
		}
	}
	s.pullsUntil = time.Now().Add(2 * time.Second)
	return nil
}

func (s *scenario) moduleIsPullAimedAtControl(ctx context.Context, module, node string) error {
	return s.pull(ctx, module, node, controlTargets)
}

func (s *scenario) modulePullsAimedAt(ctx context.Context, module, node, target string) error {
	return s.pull(ctx, module, node, []string{target})
}

func (s *scenario) moduleEmitsAimedAtControl(ctx context.Context, module, node, key string) error {
	return s.aim(ctx, wire.ModuleUser(node, module), wire.EventSubject(module, key), []byte(`{}`), controlTargets)
}

func (s *scenario) tokenEnrolsAimedAtControl(ctx context.Context, token string) error {
	s.intoControl += len(controlTargets)
	return s.aim(ctx, wire.EnrolUser(token), wire.SubjectEnrol, []byte(`{}`), controlTargets)
}

// hostReportsAimedAtControl: a host's report is stored in CONTROL, through
// the hosts' service import; its PubAck comes back to the host whatever
// reply it names (docs/decisions/0007).
func (s *scenario) hostReportsAimedAtControl(ctx context.Context, node string) error {
	s.intoControl += len(controlTargets)
	return s.aim(ctx, wire.HostUser(node), wire.NodeReport(node), []byte(`{}`), controlTargets)
}

// repositoryAnnouncesAimedAtControl: the same for a source repository's
// announcement, through the sources' service import.
func (s *scenario) repositoryAnnouncesAimedAtControl(ctx context.Context, repo string) error {
	s.intoControl += len(controlTargets)
	return s.aim(ctx, wire.SourceUser(repo), wire.SourceChanged(repo), []byte(`{}`), controlTargets)
}

// theControlPlaneIsUnchanged waits out every heartbeat the pulls could
// still send, then compares: only the requests into CONTROL themselves
// (enrolments, reports, announcements) may have been added.
func (s *scenario) theControlPlaneIsUnchanged(ctx context.Context) error {
	if s.held == nil {
		return errors.New("no earlier reading of the control plane's streams")
	}
	js, err := s.controlJS(ctx)
	if err != nil {
		return err
	}
	// The controller takes CONTROL's messages as they come (a work
	// queue): what was written there is counted by the stream's last
	// sequence, which must have grown by the requests into it alone.
	// The other streams, which nobody consumes here, are read whole.
	n := uint64(s.intoControl)
	consumed := func(k string) bool {
		return strings.HasPrefix(k, wire.StreamControl+" ") && k != wire.StreamControl+" last sequence"
	}
	want := observe.Holding{}
	for k, v := range s.held {
		if !consumed(k) {
			want[k] = v
		}
	}
	want[wire.StreamControl+" last sequence"] += n
	var last []string
	check := func(ctx context.Context) error {
		now, err := observe.Hold(ctx, js, observe.ControlStreams)
		if err != nil {
			return err
		}
		for k := range now {
			if consumed(k) {
				delete(now, k)
			}
		}
		last = want.Changes(now)
		if len(last) > 0 {
			return fmt.Errorf("expected the control plane's streams unchanged but for %d request(s) into CONTROL; %d change(s):\n  %v", n, len(last), last)
		}
		return nil
	}
	// The enrolment requests cross the import on their own time.
	if err := eventually(ctx, 5*time.Second, check); err != nil {
		return err
	}
	// And nothing may land later: the pulls' heartbeats run until they
	// expire. Every reading until then is checked.
	for time.Now().Before(s.pullsUntil.Add(500 * time.Millisecond)) {
		if err := check(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func (s *scenario) theMeshHoldsNothingOn(ctx context.Context, subject string) error {
	for _, acct := range []string{wire.AccountControl, wire.AccountMesh} {
		st, err := s.storedOn(ctx, acct, subject)
		if err != nil {
			return err
		}
		if st.count != 0 {
			return fmt.Errorf("expected nothing on %s, stream %s (account %s) holds %d message(s) there", subject, st.stream, acct, st.count)
		}
	}
	return nil
}

// hostKey is the controller's public key as the node's credential has it.
func (s *scenario) hostKey(ctx context.Context, node string) (ed25519.PublicKey, error) {
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	cred, err := r.cluster.Credential(ctx, wire.HostUser(node))
	if err != nil {
		return nil, err
	}
	return wire.DecodeDeclarationKey(cred.DeclarationKey)
}

func (s *scenario) lastDeclaration(ctx context.Context, node string) (*jetstream.RawStreamMsg, error) {
	js, err := s.controlJS(ctx)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, wire.StreamNodes)
	if err != nil {
		return nil, err
	}
	return st.GetLastMsgForSubject(ctx, wire.NodeDeclare(node))
}

func (s *scenario) verifyLast(ctx context.Context, node string) error {
	key, err := s.hostKey(ctx, node)
	if err != nil {
		return err
	}
	m, err := s.lastDeclaration(ctx, node)
	if err != nil {
		return fmt.Errorf("read %s's declaration: %w", node, err)
	}
	if _, err := wire.VerifyDeclaration(key, m.Subject, m.Data, m.Header.Get(wire.HeaderSignature)); err != nil {
		return fmt.Errorf("expected the controller's declaration for %s, got %q: %w", node, m.Data, err)
	}
	return nil
}

func (s *scenario) theDeclarationIsTheControllers(ctx context.Context, node string) error {
	return eventually(ctx, 10*time.Second, func(ctx context.Context) error { return s.verifyLast(ctx, node) })
}

// theControllerSettledControl: the controller, CONTROL's only consumer,
// has acknowledged or terminated everything CONTROL took (its ack floor is
// the stream's last sequence), and the work queue holds nothing. On AMQP:
// CONTROL's queues hold nothing, neither ready nor handed over and
// unsettled.
func (s *scenario) theControllerSettledControl(ctx context.Context, seconds int) error {
	if s.onAMQP() {
		return eventually(ctx, time.Duration(seconds)*time.Second, s.controlSettledOnAMQP)
	}
	js, err := s.streamJetStream(ctx, wire.StreamControl)
	if err != nil {
		return err
	}
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		stream, err := js.Stream(ctx, wire.StreamControl)
		if err != nil {
			return err
		}
		info, err := stream.Info(ctx)
		if err != nil {
			return err
		}
		p, err := observe.ProgressOn(ctx, js, wire.StreamControl, wire.ControlConsumer)
		if err != nil {
			return err
		}
		if !p.Acknowledged(info.State.LastSeq) || info.State.Msgs != 0 {
			return fmt.Errorf("expected CONTROL settled through sequence %d and empty, the controller's ack floor is %d with %d pending, CONTROL holds %d",
				info.State.LastSeq, p.AckFloor, p.AckPending, info.State.Msgs)
		}
		return nil
	})
}
