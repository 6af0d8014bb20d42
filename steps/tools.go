package steps

import (
	"context"
	"fmt"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go"

	proto "github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/conformance/fixture"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// tools are the steps of @tools: drivers serve and call tools. Its state
// is the scenario's serving drivers; a call's answer is the drivers'.
type tools struct {
	s       *scenario
	servers []servingDriver
}

// servingDriver is a driver serving a tool in the scenario.
type servingDriver struct {
	tool string
	d    harness.Program
}

func (s *scenario) bindTools(sc *godog.ScenarioContext) {
	t := &tools{s: s}
	sc.Step(`^the driver of "([^"]+)" serves "([^"]+)" as "([^"]+)" on "([^"]+)"(?:, (failing with the message of "([^"]+)"|panicking))?$`, t.theDriverServes)
	sc.Step(`^the driver of "([^"]+)" calls "([^".]+)\.([^"]+)" with (\{.*\}) as "([^"]+)" on "([^"]+)"$`, s.theDriverCalls)
	sc.Step(`^the answer is (\{.*\})$`, s.theAnswerIs)
	sc.Step(`^the module serving "([^"]+)" is still running$`, t.theModuleServingIsStillRunning)
	sc.Step(`^nobody serves "([^".]+)\.([^"]+)"$`, s.nobodyServes)
	sc.Step(`^"([^".]+)\.([^"]+)" is served by one that never answers$`, s.servedByOneThatNeverAnswers)
}

func (t *tools) theDriverServes(ctx context.Context, impl, tool, module, node, failing, messageFixture string) error {
	cmd := proto.Serve{Tool: tool, Duration: driverListen}
	switch {
	case failing == "panicking":
		cmd.Panic = true
	case messageFixture != "":
		var f fixture.ToolError
		if err := t.s.w.fixtures().Read(messageFixture, &f); err != nil {
			return err
		}
		cmd.Fail = f.Failure
	}
	d, err := t.s.startDriver(ctx, impl, module, node, driverRunOptions{}, cmd)
	if err != nil {
		return err
	}
	if _, err = d.WaitFor(ctx, proto.KindReady, driverReady); err != nil {
		return err
	}
	t.servers = append(t.servers, servingDriver{tool: tool, d: d})
	return nil
}

// theModuleServingIsStillRunning: a handler's panic is the caller's
// error, never a crashed module. The serving driver received the call
// (it printed it) and is still up.
func (t *tools) theModuleServingIsStillRunning(ctx context.Context, tool string) error {
	for _, sv := range t.servers {
		if sv.tool != tool {
			continue
		}
		// The call's answer can reach the caller before the served line
		// reaches the container's log: wait for it.
		if _, err := sv.d.WaitFor(ctx, proto.KindServed, driverReady); err != nil {
			return fmt.Errorf("expected the module serving %s to have received the call: %w", tool, err)
		}
		running, err := sv.d.Running(ctx)
		if err != nil {
			return err
		}
		if !running {
			logs, _ := sv.d.Logs(ctx)
			return fmt.Errorf("expected the module serving %s to keep running after its handler panicked; it ended:\n%s", tool, logs)
		}
		return nil
	}
	return fmt.Errorf("no driver serves %s in this scenario", tool)
}

// theDriverCalls calls a tool as caller on node over NATS; the answer is
// the last command's.
func (s *scenario) theDriverCalls(ctx context.Context, impl, module, tool, args, caller, node string) error {
	return s.runDriver(ctx, impl, caller, node, driverRunOptions{},
		proto.Call{Module: module, Tool: tool, Args: args, Timeout: callTimeout})
}

// callTimeout is how long a driver's call waits for its answer.
const callTimeout = 5 * time.Second

func (s *scenario) theAnswerIs(answer string) error {
	res, err := lastLine[proto.Result](s)
	if err != nil {
		done, _ := s.closing()
		return fmt.Errorf("%w (done: %+v)", err, done)
	}
	if res.Body != answer {
		return fmt.Errorf("expected the answer %s, got %s", answer, res.Body)
	}
	return nil
}

func (s *scenario) nobodyServes(ctx context.Context, module, tool string) error {
	subject := wire.ToolSubject(module, tool)
	body, err := s.monitor(ctx, observe.SubszURL(s.r.mesh.Bus.Monitor, s.r.mesh.Bus.MonitorPort, subject))
	if err != nil {
		return err
	}
	n, err := observe.Subscribers(body)
	if err != nil {
		return err
	}
	if n != 0 {
		return fmt.Errorf("expected nobody to serve %s, the server has %d subscription(s)", subject, n)
	}
	return nil
}

func (s *scenario) servedByOneThatNeverAnswers(ctx context.Context, module, tool string) error {
	c, err := s.connectEmitter(ctx, module)
	if err != nil {
		return err
	}
	_, err = c.QueueSubscribe(wire.ToolSubject(module, tool), wire.ToolQueue(module, tool), func(*nats.Msg) {})
	if err != nil {
		return err
	}
	return c.FlushWithContext(ctx)
}
