package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/wire"
)

func (s *scenario) bindConformance(sc *godog.ScenarioContext) {
	sc.Step(`^the registry of implementations says:$`, s.theRegistrySays)
	sc.Step(`^the scenarios of this feature check every capability an implementation claims, and none it does not$`, s.theScenariosCheckExactlyTheClaims)
	sc.Step(`^the build path checks a module in "([^"]+)" that emits "([^"]+)"(?: and serves "([^"]+)")?$`, s.theBuildPathChecks)
	sc.Step(`^the build is refused, naming the module and the language without an SDK$`, s.theBuildIsRefused)
	sc.Step(`^the build is accepted$`, s.theBuildIsAccepted)

	sc.Step(`^the driver of "([^"]+)" connects as "([^"]+)" on "([^"]+)"$`, s.theDriverConnects)
	sc.Step(`^the driver of "([^"]+)" connects as "([^"]+)" on "([^"]+)" pinning the fingerprint of "([^"]+)"$`, s.theDriverConnectsPinning)
	sc.Step(`^the driver of "([^"]+)" connects as "([^"]+)" on "([^"]+)" in the environment of "([^"]+)"$`, s.theDriverConnectsInEnvironment)
	sc.Step(`^it has taken the identity module "([^"]+)" on node "([^"]+)"$`, s.itHasTakenTheIdentity)
	sc.Step(`^the environment it reports is node "([^"]+)" and module "([^"]+)"$`, s.theEnvironmentItReports)
	sc.Step(`^it is refused as "([^"]+)"(?:, with the message of "([^"]+)")?$`, s.itIsRefusedAs)

	sc.Step(`^the driver of "([^"]+)" emits "([^"]+)" as "([^"]+)" on "([^"]+)"(?: in the environment of "([^"]+)")?$`, s.theDriverEmits)
	sc.Step(`^the bus holds the event of "([^"]+)", header by header and byte for byte$`, s.theBusHoldsTheEvent)

	sc.Step(`^the driver of "([^"]+)" consumes "([^"]+)" as "([^"]+)" on "([^"]+)"(?: with a handler that (always fails|fails for (\d+) seconds?))?$`, s.theDriverConsumes)
	sc.Step(`^the delivery of "([^"]+)" is published on the bus( as often as it says)?$`, s.theDeliveryIsPublished)
	sc.Step(`^the handler received exactly the event "([^"]+)" describes$`, s.theHandlerReceivedExactly)
	sc.Step(`^the driver refused it, naming the header "([^"]+)" says is missing$`, s.theDriverRefusedIt)
	sc.Step(`^the driver refused it, naming what "([^"]+)" says is refused$`, s.theDriverRefusedIt)
	sc.Step(`^the consumer "([^"]+)" acknowledges it within (\d+) seconds$`, s.theConsumerAcknowledgesIt)
	sc.Step(`^the handler received it more than once$`, s.theHandlerReceivedItMoreThanOnce)
	sc.Step(`^the DEAD stream holds no max-deliveries advisory of the consumer "([^"]+)" for that event$`, s.theDeadStreamHoldsNoAdvisory)
	sc.Step(`^no handler received it$`, s.noHandlerReceivedIt)
	sc.Step(`^the handler received it as often as "([^"]+)" says$`, s.theHandlerReceivedItAsOftenAsItSays)
	sc.Step(`^the DEAD stream holds the max-deliveries advisory of the consumer "([^"]+)" for that event$`, s.theDeadStreamHoldsTheAdvisory)
	sc.Step(`^the handler received it as often as the consumer's max-deliver$`, s.theHandlerReceivedItMaxDeliverTimes)

	sc.Step(`^the driver of "([^"]+)" serves "([^"]+)" as "([^"]+)" on "([^"]+)"(?:, (failing with the message of "([^"]+)"|panicking))?$`, s.theDriverServes)
	sc.Step(`^the driver of "([^"]+)" calls "([^".]+)\.([^"]+)" with (\{.*\}) as "([^"]+)" on "([^"]+)"$`, s.theDriverCalls)
	sc.Step(`^the answer is (\{.*\})$`, s.theAnswerIs)
	sc.Step(`^the module serving "([^"]+)" is still running$`, s.theModuleServingIsStillRunning)
	sc.Step(`^nobody serves "([^".]+)\.([^"]+)"$`, s.nobodyServes)
	sc.Step(`^"([^".]+)\.([^"]+)" is served by one that never answers$`, s.servedByOneThatNeverAnswers)

	sc.Step(`^the driver of "([^"]+)" reads the grant "([^"]+)"$`, s.theDriverReadsTheGrant)
	sc.Step(`^it yields, entry by entry, the module and node of "([^"]+)"$`, s.itYieldsTheGrant)
}

// ---- the registry and the build path ----

func (s *scenario) theRegistrySays(t *godog.Table) error {
	reg, err := s.w.registry()
	if err != nil {
		return err
	}
	var problems []string
	var listed []string
	for _, row := range table(t) {
		name := row["implementation"]
		listed = append(listed, name)
		impl, ok := reg.Implementation(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: not in the registry", name))
			continue
		}
		if impl.Language != row["language"] {
			problems = append(problems, fmt.Sprintf("%s: expected language %s, the registry says %s", name, row["language"], impl.Language))
		}
		for _, c := range conformance.Capabilities {
			want := row[string(c)] == "claimed"
			if impl.ClaimsCapability(c) != want {
				problems = append(problems, fmt.Sprintf("%s: expected %s %s, the registry says claimed=%v", name, c, row[string(c)], !want))
			}
		}
	}
	for _, impl := range reg.Implementations {
		if !slices.Contains(listed, impl.Name) {
			problems = append(problems, fmt.Sprintf("%s: in the registry, not in the table", impl.Name))
		}
	}
	return joinProblems(problems)
}

// theScenariosCheckExactlyTheClaims reads this bed's own scenarios: for
// each capability, the implementations its scenarios check (the values of
// the examples column the bed's matrix has a row for) must be exactly
// those claiming it.
func (s *scenario) theScenariosCheckExactlyTheClaims(ctx context.Context) error {
	reg, err := s.w.registry()
	if err != nil {
		return err
	}
	bed, _, ok := beds.Current(ctx)
	if !ok {
		return errors.New("not running in a bed")
	}
	if bed.Matrix == nil {
		return fmt.Errorf("bed %s lists no matrix: nothing says which examples column names the implementation", bed.Name)
	}
	plan, err := beds.Scenarios(os.DirFS(s.w.opts.FeaturesDir), bed, "")
	if err != nil {
		return err
	}
	var problems []string
	for _, c := range conformance.Capabilities {
		checked := map[string]bool{}
		for _, sc := range plan {
			if !slices.Contains(sc.Tags, "@"+string(c)) {
				continue
			}
			if v, ok := sc.Param(bed.Matrix.Param); ok {
				checked[v] = true
			}
		}
		claimants := reg.Claimants(c)
		for _, name := range claimants {
			if !checked[name] {
				problems = append(problems, fmt.Sprintf("%s claims %s, no scenario tagged @%s checks it", name, c, c))
			}
		}
		for name := range checked {
			if !slices.Contains(claimants, name) {
				problems = append(problems, fmt.Sprintf("a scenario tagged @%s checks %s, which does not claim it", c, name))
			}
		}
	}
	return joinProblems(problems)
}

// buildOutcome is what the build path's check answered.
type buildOutcome struct {
	module string
	exit   int
	output string
}

func (s *scenario) theBuildPathChecks(ctx context.Context, language, key, tool string) error {
	module := "built-" + language
	desc := fmt.Sprintf("name: build\nbus: {names: [nats], monitor: nats}\nnodes: [{name: node-a, modules: [%s]}]\nmodules:\n  - {name: %s, language: %s, emits: [%s]", module, module, language, key)
	if tool != "" {
		desc += ", tools: [" + tool + "]"
	}
	desc += "}\n"
	dir, err := os.MkdirTemp("", "mesh-build-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(file, []byte(desc), 0o644); err != nil {
		return err
	}
	// The build path's own command, run as the builder runs it.
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/mesh-build", "check", "--mesh", file)
	cmd.Dir = s.w.root()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		s.build = buildOutcome{module: module, exit: exit.ExitCode(), output: string(out)}
	case err != nil:
		return fmt.Errorf("run mesh-build check: %w\n%s", err, out)
	default:
		s.build = buildOutcome{module: module, output: string(out)}
	}
	return nil
}

func (s *scenario) theBuildIsRefused() error {
	if s.build.exit != 1 {
		return fmt.Errorf("expected the build refused (exit 1), got exit %d:\n%s", s.build.exit, s.build.output)
	}
	for _, want := range []string{fmt.Sprintf("module %q", s.build.module), "no SDK for language"} {
		if !strings.Contains(s.build.output, want) {
			return fmt.Errorf("expected the refusal to say %q, it says:\n%s", want, s.build.output)
		}
	}
	return nil
}

func (s *scenario) theBuildIsAccepted() error {
	if s.build.exit != 0 {
		return fmt.Errorf("expected the build accepted, got exit %d:\n%s", s.build.exit, s.build.output)
	}
	return nil
}

// ---- the floor ----

func (s *scenario) theDriverConnects(ctx context.Context, impl, module, node string) error {
	return s.runDriver(ctx, impl, module, node, driverRunOptions{}, "connect")
}

func (s *scenario) theDriverConnectsPinning(ctx context.Context, impl, module, node, fixture string) error {
	var f struct {
		Fingerprint string `json:"fingerprint"`
	}
	if err := s.w.fixture(fixture, &f); err != nil {
		return err
	}
	return s.runDriver(ctx, impl, module, node, driverRunOptions{fingerprint: f.Fingerprint}, "connect")
}

func (s *scenario) environment(fixture string) (map[string]string, error) {
	env := map[string]string{}
	return env, s.w.fixture(fixture, &env)
}

func (s *scenario) theDriverConnectsInEnvironment(ctx context.Context, impl, module, node, fixture string) error {
	env, err := s.environment(fixture)
	if err != nil {
		return err
	}
	return s.runDriver(ctx, impl, module, node, driverRunOptions{env: env}, "connect")
}

func (s *scenario) itHasTakenTheIdentity(module, node string) error {
	id, err := s.line("identity")
	if err != nil {
		return err
	}
	if id.String("module") != module || id.String("node") != node {
		return fmt.Errorf("expected module %s on node %s, the driver took module %s on node %s", module, node, id.String("module"), id.String("node"))
	}
	return nil
}

func (s *scenario) theEnvironmentItReports(node, module string) error {
	id, err := s.line("identity")
	if err != nil {
		return err
	}
	if id.String("env_node") != node || id.String("env_module") != module {
		return fmt.Errorf("expected the environment overwritten to node %s, module %s; it is node %q, module %q", node, module, id.String("env_node"), id.String("env_module"))
	}
	return nil
}

func (s *scenario) itIsRefusedAs(class, messageFixture string) error {
	done, err := s.done()
	if err != nil {
		return err
	}
	if ok, _ := done["ok"].(bool); ok {
		return fmt.Errorf("expected a refusal of class %q, the driver succeeded: %v", class, s.lines)
	}
	if got := done.String("class"); got != class {
		return fmt.Errorf("expected a refusal of class %q, got %q: %s", class, got, done.String("message"))
	}
	if messageFixture == "" {
		return nil
	}
	var f struct {
		Failure string `json:"failure"`
	}
	if err := s.w.fixture(messageFixture, &f); err != nil {
		return err
	}
	if !strings.Contains(done.String("message"), f.Failure) {
		return fmt.Errorf("expected the error to carry the handler's message %q, got %q", f.Failure, done.String("message"))
	}
	return nil
}

// ---- events ----

// eventWire is what a fixture says must be on the bus.
type eventWire struct {
	Subject string            `json:"subject"`
	Headers map[string]string `json:"headers"`
	MsgID   string            `json:"msg_id"`
	Body    string            `json:"body"`
}

func (s *scenario) theDriverEmits(ctx context.Context, impl, fixture, module, node, envFixture string) error {
	o := driverRunOptions{}
	if envFixture != "" {
		env, err := s.environment(envFixture)
		if err != nil {
			return err
		}
		o.env = env
	}
	s.r.tainted = true
	if err := s.runDriver(ctx, impl, module, node, o, "emit", "--fixture", harness.DriverFixtures+"/"+fixture); err != nil {
		return err
	}
	done, err := s.done()
	if err != nil {
		return err
	}
	if ok, _ := done["ok"].(bool); !ok {
		return fmt.Errorf("expected the emit to succeed: %s: %s", done.String("class"), done.String("message"))
	}
	return nil
}

func (s *scenario) theBusHoldsTheEvent(ctx context.Context, fixture string) error {
	var f struct {
		Wire eventWire `json:"wire"`
	}
	if err := s.w.fixture(fixture, &f); err != nil {
		return err
	}
	js, err := s.streamJetStream(ctx, wire.StreamEvents)
	if err != nil {
		return err
	}
	st, err := js.Stream(ctx, wire.StreamEvents)
	if err != nil {
		return err
	}
	msg, err := st.GetLastMsgForSubject(ctx, f.Wire.Subject)
	if err != nil {
		return fmt.Errorf("read the last event on %s: %w", f.Wire.Subject, err)
	}
	var problems []string
	want := map[string]string{jetstream.MsgIDHeader: f.Wire.MsgID}
	for k, v := range f.Wire.Headers {
		want[k] = v
	}
	for k, v := range want {
		if got := msg.Header.Values(k); len(got) != 1 || got[0] != v {
			problems = append(problems, fmt.Sprintf("header %s: expected %q, got %q", k, v, got))
		}
	}
	for k := range msg.Header {
		if _, ok := want[k]; !ok {
			problems = append(problems, fmt.Sprintf("header %s: not in the fixture, got %q", k, msg.Header.Values(k)))
		}
	}
	if string(msg.Data) != f.Wire.Body {
		problems = append(problems, fmt.Sprintf("body: expected %q, got %q", f.Wire.Body, msg.Data))
	}
	return joinProblems(problems)
}

// deliveryFixture is a delivery the bed publishes as the emitter.
type deliveryFixture struct {
	Subject    string            `json:"subject"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"`
	Handled    json.RawMessage   `json:"handled"`
	Refused    string            `json:"refused"`
	Deliveries int               `json:"deliveries"`
}

// publishedDelivery is one delivery the bed published, and where it went.
type publishedDelivery struct {
	fixture string
	id      string
	seq     uint64
}

func (s *scenario) theDriverConsumes(ctx context.Context, impl, pattern, module, node, failing, seconds string) error {
	args := []string{"consume", "--pattern", pattern, "--count", "1000", "--timeout", driverListen.String()}
	switch {
	case seconds != "":
		args = append(args, "--fail-for", seconds+"s")
	case failing != "":
		args = append(args, "--fail")
	}
	d, err := s.startDriver(ctx, impl, module, node, driverRunOptions{}, args...)
	if err != nil {
		return err
	}
	if _, err := d.WaitFor(ctx, "ready", driverReady); err != nil {
		return err
	}
	s.consumer = d
	return nil
}

func (s *scenario) theDeliveryIsPublished(ctx context.Context, fixture, repeated string) error {
	var f deliveryFixture
	if err := s.w.fixture(fixture, &f); err != nil {
		return err
	}
	source, _, err := wire.EventKeyFromSubject(f.Subject)
	if err != nil {
		return err
	}
	// Published as the emitter, with its own credential, so the server
	// judges it like any emit; each copy has its own message id, so that
	// the stream keeps both and only the consumer can deduplicate.
	c, err := s.connect(ctx, wire.ModuleUser(f.Headers[wire.HeaderNode], source))
	if err != nil {
		c, err = s.connectEmitter(ctx, source)
		if err != nil {
			return err
		}
	}
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	s.r.tainted = true
	times := 1
	if repeated != "" {
		times = f.Deliveries
	}
	for i := 0; i < times; i++ {
		msg := &nats.Msg{Subject: f.Subject, Header: nats.Header{}, Data: []byte(f.Body)}
		for k, v := range f.Headers {
			msg.Header[k] = []string{v}
		}
		ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(nuid.Next()))
		if err != nil {
			return fmt.Errorf("publish %s: %w", fixture, err)
		}
		s.published = append(s.published, publishedDelivery{fixture: fixture, id: f.Headers[wire.HeaderEventID], seq: ack.Sequence})
	}
	return nil
}

// connectEmitter connects as the module on whichever node runs it.
func (s *scenario) connectEmitter(ctx context.Context, module string) (*client, error) {
	for _, pl := range s.r.mesh.Placements() {
		if pl.Module.Name == module {
			return s.connect(ctx, wire.ModuleUser(pl.Node, module))
		}
	}
	return nil, fmt.Errorf("module %s runs on no node", module)
}

// consumed reads the consuming driver's lines of kind about event id.
func (s *scenario) consumed(ctx context.Context, kind, id string) ([]harness.DriverLine, error) {
	if s.consumer == nil {
		return nil, errors.New("no driver consumes in this scenario")
	}
	lines, err := s.consumer.Lines(ctx)
	if err != nil {
		return nil, err
	}
	var out []harness.DriverLine
	for _, l := range lines {
		if l.Kind() != kind {
			continue
		}
		if kind == "handled" {
			ev, _ := l["event"].(map[string]any)
			if got, _ := ev["id"].(string); got != id {
				continue
			}
		}
		out = append(out, l)
	}
	return out, nil
}

func (s *scenario) theHandlerReceivedExactly(ctx context.Context, fixture string) error {
	var f deliveryFixture
	if err := s.w.fixture(fixture, &f); err != nil {
		return err
	}
	var want map[string]any
	if err := json.Unmarshal(f.Handled, &want); err != nil {
		return fmt.Errorf("read fixture %s: handled: %w", fixture, err)
	}
	return eventually(ctx, driverReady, func(ctx context.Context) error {
		got, err := s.consumed(ctx, "handled", f.Headers[wire.HeaderEventID])
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return fmt.Errorf("no handler received %s yet", f.Headers[wire.HeaderEventID])
		}
		ev, _ := got[0]["event"].(map[string]any)
		var problems []string
		for k, v := range want {
			if fmt.Sprint(ev[k]) != fmt.Sprint(v) {
				problems = append(problems, fmt.Sprintf("%s: expected %q, got %q", k, v, ev[k]))
			}
		}
		return joinProblems(problems)
	})
}

func (s *scenario) theDriverRefusedIt(ctx context.Context, fixture string) error {
	var f deliveryFixture
	if err := s.w.fixture(fixture, &f); err != nil {
		return err
	}
	return eventually(ctx, driverReady, func(ctx context.Context) error {
		refusals, err := s.consumed(ctx, "refused", "")
		if err != nil {
			return err
		}
		for _, r := range refusals {
			// part names what was refused: a header, or the body;
			// header is kept for drivers that name headers only.
			if r.String("part") == f.Refused || r.String("header") == f.Refused {
				return nil
			}
		}
		return fmt.Errorf("expected a refusal naming %s, the driver reported %v", f.Refused, refusals)
	})
}

func (s *scenario) lastPublished() (publishedDelivery, error) {
	if len(s.published) == 0 {
		return publishedDelivery{}, errors.New("the bed published nothing in this scenario")
	}
	return s.published[len(s.published)-1], nil
}

func (s *scenario) noHandlerReceivedIt(ctx context.Context) error {
	p, err := s.lastPublished()
	if err != nil {
		return err
	}
	got, err := s.consumed(ctx, "handled", p.id)
	if err != nil {
		return err
	}
	if len(got) > 0 {
		return fmt.Errorf("expected no handler to receive %s, got %v", p.id, got)
	}
	return nil
}

// settled waits until the consumer has nothing pending: every delivery
// of the scenario has been acknowledged (or terminated).
func (s *scenario) settled(ctx context.Context, consumer string) error {
	return s.nothingIsPending(ctx, consumer)
}

func (s *scenario) theHandlerReceivedItAsOftenAsItSays(ctx context.Context, fixture string) error {
	var f deliveryFixture
	if err := s.w.fixture(fixture, &f); err != nil {
		return err
	}
	var want int
	if err := json.Unmarshal(f.Handled, &want); err != nil {
		return fmt.Errorf("read fixture %s: handled is a count: %w", fixture, err)
	}
	if err := s.settled(ctx, wire.ModuleConsumer(s.consumerNode(), s.consumerModule())); err != nil {
		return err
	}
	got, err := s.consumed(ctx, "handled", f.Headers[wire.HeaderEventID])
	if err != nil {
		return err
	}
	if len(got) != want {
		return fmt.Errorf("expected the handler to receive %s %d time(s) after %d deliveries, it received it %d time(s)", f.Headers[wire.HeaderEventID], want, f.Deliveries, len(got))
	}
	return nil
}

// The conformance mesh's consuming module.
func (s *scenario) consumerModule() string { return "consumer" }
func (s *scenario) consumerNode() string   { return "node-b" }

// advisory is the server's max-deliveries advisory.
type advisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries int    `json:"deliveries"`
}

func (s *scenario) theDeadStreamHoldsTheAdvisory(ctx context.Context, consumer string) error {
	p, err := s.lastPublished()
	if err != nil {
		return err
	}
	return eventually(ctx, 2*time.Minute, func(ctx context.Context) error {
		a, err := s.deadAdvisory(ctx, consumer, p.seq)
		if err != nil {
			return err
		}
		if a == nil {
			return fmt.Errorf("no max-deliveries advisory of %s for stream sequence %d in DEAD", consumer, p.seq)
		}
		beds.Logf(ctx, "dead-lettered after %d deliveries", a.Deliveries)
		return nil
	})
}

// theConsumerAcknowledgesIt: the server says the scenario's last delivery
// was acknowledged (the consumer's ack floor has passed it, nothing is
// pending), which a handler that never succeeded cannot bring about.
func (s *scenario) theConsumerAcknowledgesIt(ctx context.Context, consumer string, seconds int) error {
	p, err := s.lastPublished()
	if err != nil {
		return err
	}
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		info, err := s.consumerInfo(ctx, consumer)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream < p.seq || info.NumAckPending != 0 {
			return fmt.Errorf("expected %s to have acknowledged stream sequence %d, its ack floor is %d with %d pending (%d redelivered)",
				consumer, p.seq, info.AckFloor.Stream, info.NumAckPending, info.NumRedelivered)
		}
		return nil
	})
}

func (s *scenario) theHandlerReceivedItMoreThanOnce(ctx context.Context) error {
	p, err := s.lastPublished()
	if err != nil {
		return err
	}
	got, err := s.consumed(ctx, "handled", p.id)
	if err != nil {
		return err
	}
	if len(got) < 2 {
		return fmt.Errorf("expected the handler to receive %s again after failing, it received it %d time(s)", p.id, len(got))
	}
	beds.Logf(ctx, "handled after %d deliveries", len(got))
	return nil
}

func (s *scenario) theDeadStreamHoldsNoAdvisory(ctx context.Context, consumer string) error {
	p, err := s.lastPublished()
	if err != nil {
		return err
	}
	a, err := s.deadAdvisory(ctx, consumer, p.seq)
	if err != nil {
		return err
	}
	if a != nil {
		return fmt.Errorf("expected no max-deliveries advisory of %s for stream sequence %d, DEAD holds one after %d deliveries", consumer, p.seq, a.Deliveries)
	}
	return nil
}

// deadAdvisory is the max-deliveries advisory of consumer for the stream
// sequence seq that DEAD holds, or nil.
func (s *scenario) deadAdvisory(ctx context.Context, consumer string, seq uint64) (*advisory, error) {
	js, err := s.streamJetStream(ctx, wire.StreamDead)
	if err != nil {
		return nil, err
	}
	dead, err := js.Stream(ctx, wire.StreamDead)
	if err != nil {
		return nil, err
	}
	info, err := dead.Info(ctx)
	if err != nil {
		return nil, err
	}
	for n := info.State.FirstSeq; n <= info.State.LastSeq && n > 0; n++ {
		msg, err := dead.GetMsg(ctx, n)
		if err != nil {
			continue
		}
		var a advisory
		if json.Unmarshal(msg.Data, &a) == nil && a.Consumer == consumer && a.StreamSeq == seq {
			return &a, nil
		}
	}
	return nil, nil
}

func (s *scenario) theHandlerReceivedItMaxDeliverTimes(ctx context.Context) error {
	p, err := s.lastPublished()
	if err != nil {
		return err
	}
	info, err := s.consumerInfo(ctx, wire.ModuleConsumer(s.consumerNode(), s.consumerModule()))
	if err != nil {
		return err
	}
	want := info.Config.MaxDeliver
	got, err := s.consumed(ctx, "handled", p.id)
	if err != nil {
		return err
	}
	if len(got) != want {
		return fmt.Errorf("expected the handler to receive %s %d time(s) (max-deliver), got %d", p.id, want, len(got))
	}
	return nil
}

// ---- tools ----

func (s *scenario) theDriverServes(ctx context.Context, impl, tool, module, node, failing, messageFixture string) error {
	args := []string{"serve", "--tool", tool, "--duration", driverListen.String()}
	switch {
	case failing == "panicking":
		args = append(args, "--panic")
	case messageFixture != "":
		var f struct {
			Failure string `json:"failure"`
		}
		if err := s.w.fixture(messageFixture, &f); err != nil {
			return err
		}
		args = append(args, "--fail", f.Failure)
	}
	d, err := s.startDriver(ctx, impl, module, node, driverRunOptions{}, args...)
	if err != nil {
		return err
	}
	if _, err = d.WaitFor(ctx, "ready", driverReady); err != nil {
		return err
	}
	s.servers = append(s.servers, servingDriver{tool: tool, d: d})
	return nil
}

// servingDriver is a driver serving a tool in the scenario.
type servingDriver struct {
	tool string
	d    *harness.Driver
}

// theModuleServingIsStillRunning: a handler's panic is the caller's
// error, never a crashed module. The serving driver answered the call
// (it printed it) and is still up.
func (s *scenario) theModuleServingIsStillRunning(ctx context.Context, tool string) error {
	for _, sv := range s.servers {
		if sv.tool != tool {
			continue
		}
		lines, err := sv.d.Lines(ctx)
		if err != nil {
			return err
		}
		served := 0
		for _, l := range lines {
			if l.Kind() == "served" {
				served++
			}
		}
		if served == 0 {
			return fmt.Errorf("expected the module serving %s to have received the call, it printed %v", tool, lines)
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

func (s *scenario) theDriverCalls(ctx context.Context, impl, module, tool, args, caller, node string) error {
	return s.runDriver(ctx, impl, caller, node, driverRunOptions{},
		"call", "--module", module, "--tool", tool, "--args", args, "--timeout", "5s")
}

func (s *scenario) theAnswerIs(answer string) error {
	res, err := s.line("result")
	if err != nil {
		done, _ := s.done()
		return fmt.Errorf("%w (done: %v)", err, done)
	}
	if got := res.String("body"); got != answer {
		return fmt.Errorf("expected the answer %s, got %s", answer, got)
	}
	return nil
}

func (s *scenario) nobodyServes(ctx context.Context, module, tool string) error {
	subject := wire.ToolSubject(module, tool)
	res, err := s.r.cluster.Probe(ctx, harness.Private, "http",
		fmt.Sprintf("http://%s:%d/subsz?subs=1&test=%s", s.r.mesh.Bus.Monitor, s.r.mesh.Bus.MonitorPort, subject))
	if err != nil {
		return err
	}
	var subsz struct {
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(res.Body), &subsz); err != nil {
		return fmt.Errorf("read /subsz: %w (%+v)", err, res)
	}
	if subsz.Total != 0 {
		return fmt.Errorf("expected nobody to serve %s, the server has %s subscription(s)", subject, strconv.Itoa(subsz.Total))
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

// ---- provisioning ----

func (s *scenario) theDriverReadsTheGrant(ctx context.Context, impl, fixture string) error {
	// Any module's credential will do: reading a grant touches no bus.
	return s.runDriver(ctx, impl, "server", "node-a", driverRunOptions{}, "grant", "--file", harness.DriverFixtures+"/"+fixture)
}

func (s *scenario) itYieldsTheGrant(fixture string) error {
	var want []struct {
		Module string `json:"module"`
		Node   string `json:"node"`
	}
	if err := s.w.fixture(fixture, &want); err != nil {
		return err
	}
	var got []string
	for _, l := range s.lines {
		if l.Kind() == "grant" {
			got = append(got, l.String("module")+"@"+l.String("node"))
		}
	}
	var exp []string
	for _, g := range want {
		exp = append(exp, g.Module+"@"+g.Node)
	}
	if !slices.Equal(got, exp) {
		done, _ := s.done()
		return fmt.Errorf("expected the grants %v, the driver read %v (done: %v)", exp, got, done)
	}
	return nil
}
