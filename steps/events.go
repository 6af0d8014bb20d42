package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/meshbus/mesh/beds"
	proto "github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/conformance/fixture"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// The conformance mesh's consuming module (features/testdata/conformance.yaml).
const (
	consumerModule = "consumer"
	consumerNode   = "node-b"
)

// events are the steps of @events: a driver emits or consumes, the bed
// publishes deliveries as the emitter, and the server says what became of
// them. Its state is the scenario's consuming driver, what the bed
// published, and the watch on the server's termination advisories.
type events struct {
	s         *scenario
	consumer  harness.Program
	published []publishedDelivery
	watch     *observe.Terminations
}

// publishedDelivery is one delivery the bed published, and where it went.
type publishedDelivery struct {
	fixture string
	id      string
	seq     uint64
}

func (s *scenario) bindEvents(sc *godog.ScenarioContext) {
	e := &events{s: s}
	sc.Step(`^the driver of "([^"]+)" emits "([^"]+)" as "([^"]+)" on "([^"]+)"(?: in the environment of "([^"]+)")?$`, e.theDriverEmits)
	sc.Step(`^the bus holds the event of "([^"]+)", header by header and byte for byte$`, e.theBusHoldsTheEvent)

	sc.Step(`^the driver of "([^"]+)" consumes "([^"]+)" as "([^"]+)" on "([^"]+)"(?: with a handler that (always fails|fails for (\d+) seconds?))?(?:, asked again first after (\d+) ms)?$`, e.theDriverConsumes)
	sc.Step(`^the delivery of "([^"]+)" is published on the bus( as often as it says)?$`, e.theDeliveryIsPublished)
	sc.Step(`^the handler received exactly the event "([^"]+)" describes$`, e.theHandlerReceivedExactly)
	sc.Step(`^the server advises that "([^"]+)" terminated it, naming the header "([^"]+)" says is missing$`, e.theServerAdvisesItTerminated)
	sc.Step(`^the server advises that "([^"]+)" terminated it, naming what "([^"]+)" says is refused$`, e.theServerAdvisesItTerminated)
	sc.Step(`^the consumer "([^"]+)" acknowledges it within (\d+) seconds$`, e.theConsumerAcknowledgesIt)
	sc.Step(`^the handler received it more than once$`, e.theHandlerReceivedItMoreThanOnce)
	sc.Step(`^the DEAD stream holds no max-deliveries advisory of the consumer "([^"]+)" for that event$`, e.theDeadStreamHoldsNoAdvisory)
	sc.Step(`^no handler received it$`, e.noHandlerReceivedIt)
	sc.Step(`^the handler received it as often as "([^"]+)" says$`, e.theHandlerReceivedItAsOftenAsItSays)
	sc.Step(`^the DEAD stream holds the max-deliveries advisory of the consumer "([^"]+)" for that event$`, e.theDeadStreamHoldsTheAdvisory)
	sc.Step(`^the handler received it as often as the consumer's max-deliver$`, e.theHandlerReceivedItMaxDeliverTimes)
}

// ---- emitting ----

func (e *events) theDriverEmits(ctx context.Context, impl, name, module, node, envFixture string) error {
	o := driverRunOptions{}
	if envFixture != "" {
		var env fixture.Environment
		if err := e.s.w.fixtures().Read(envFixture, &env); err != nil {
			return err
		}
		o.env = env
	}
	// The fixture's message id stays in the stream's duplicate window,
	// which a purge keeps: a later emit of the same fixture would be
	// dropped as its duplicate, so no reset puts this back.
	e.s.r.tainted = true
	if err := e.s.runDriver(ctx, impl, module, node, o, proto.Emit{Fixture: inDriver(name)}); err != nil {
		return err
	}
	return e.s.succeeded("emit")
}

func (e *events) theBusHoldsTheEvent(ctx context.Context, name string) error {
	var f fixture.Event
	if err := e.s.w.fixtures().Read(name, &f); err != nil {
		return err
	}
	js, err := e.s.streamJetStream(ctx, wire.StreamEvents)
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
	return joinProblems(f.Wire.Compare(msg.Header, msg.Data))
}

// ---- consuming ----

func (e *events) theDriverConsumes(ctx context.Context, impl, pattern, module, node, failing, seconds, firstMS string) error {
	cmd := proto.Consume{Patterns: []string{pattern}, Count: driverCount, Timeout: driverListen}
	if firstMS != "" {
		var n int
		if _, err := fmt.Sscan(firstMS, &n); err != nil {
			return err
		}
		cmd.RedeliverAfter = time.Duration(n) * time.Millisecond
	}
	switch {
	case seconds != "":
		var n int
		if _, err := fmt.Sscan(seconds, &n); err != nil {
			return err
		}
		cmd.FailFor = time.Duration(n) * time.Second
	case failing != "":
		cmd.Fail = true
	}
	e.s.touched.drove(wire.ModuleConsumer(node, module))
	d, err := e.s.startDriver(ctx, impl, module, node, driverRunOptions{}, cmd)
	if err != nil {
		return err
	}
	if _, err := d.WaitFor(ctx, proto.KindReady, driverReady); err != nil {
		return err
	}
	e.consumer = d
	return nil
}

// theDeliveryIsPublished publishes as the emitter, with its own
// credential, so the server judges it like any emit; each copy has its
// own message id, so that the stream keeps both and only the consumer can
// deduplicate. Before it publishes, the bed listens for the server's
// termination advisories, which the server sends only to a listener.
func (e *events) theDeliveryIsPublished(ctx context.Context, name, repeated string) error {
	var f fixture.Delivery
	if err := e.s.w.fixtures().Read(name, &f); err != nil {
		return err
	}
	source, _, err := wire.EventKeyFromSubject(f.Subject)
	if err != nil {
		return err
	}
	if err := e.watching(ctx); err != nil {
		return err
	}
	c, err := e.s.connect(ctx, wire.ModuleUser(f.Headers[wire.HeaderNode], source))
	if err != nil {
		c, err = e.s.connectEmitter(ctx, source)
		if err != nil {
			return err
		}
	}
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	// Each copy has an id of its own, so a purge puts the streams back;
	// a delivery refused or failed for good leaves a dead letter.
	e.s.touched.stored(wire.StreamEvents, wire.StreamDead)
	times := 1
	if repeated != "" {
		times = f.Deliveries
	}
	for range times {
		msg := &nats.Msg{Subject: f.Subject, Header: nats.Header{}, Data: []byte(f.Body)}
		for k, v := range f.Headers {
			msg.Header[k] = []string{v}
		}
		ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(nuid.Next()))
		if err != nil {
			return fmt.Errorf("publish %s: %w", name, err)
		}
		e.published = append(e.published, publishedDelivery{fixture: name, id: f.ID(), seq: ack.Sequence})
	}
	return nil
}

// watching listens for the server's termination advisories as the
// controller's user in the mesh account, the one principal granted them;
// a watch whose connection the bus's restart closed is started again.
func (e *events) watching(ctx context.Context) error {
	if e.watch != nil && e.watch.Live() {
		return nil
	}
	c, err := e.s.connect(ctx, wire.ControllerMeshUser)
	if err != nil {
		return err
	}
	e.watch, err = observe.WatchTerminations(ctx, c.Client)
	return err
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

// handled is what the consuming driver's handlers received of event id,
// one per delivery.
func (e *events) handled(ctx context.Context, id string) ([]proto.Event, error) {
	if e.consumer == nil {
		return nil, errors.New("no driver consumes in this scenario")
	}
	lines, err := e.consumer.Lines(ctx)
	if err != nil {
		return nil, err
	}
	var out []proto.Event
	for _, h := range proto.All[proto.Handled](lines) {
		if h.Event.ID == id {
			out = append(out, h.Event)
		}
	}
	return out, nil
}

// handledAtLeast waits until the driver's output shows the handler
// received the event n times, and returns every time it did. The driver
// prints a line before it settles the delivery, but the line reaches the
// container's log a moment later than the settlement reaches the server:
// an observation made on the server is not yet in the log. Callers compare
// the count they get with the one they expect; more than n is still seen.
func (e *events) handledAtLeast(ctx context.Context, id string, n int) ([]proto.Event, error) {
	var got []proto.Event
	err := eventually(ctx, driverReady, func(ctx context.Context) error {
		var err error
		if got, err = e.handled(ctx, id); err != nil {
			return err
		}
		if len(got) < n {
			return fmt.Errorf("expected the handler's output to show %s received %d time(s), it shows %d", id, n, len(got))
		}
		return nil
	})
	return got, err
}

func (e *events) lastPublished() (publishedDelivery, error) {
	if len(e.published) == 0 {
		return publishedDelivery{}, errors.New("the bed published nothing in this scenario")
	}
	return e.published[len(e.published)-1], nil
}

// theHandlerReceivedExactly: the consuming driver's handler received the
// event the fixture describes, a delivery the bed published or an event
// another driver emitted, field by field.
func (e *events) theHandlerReceivedExactly(ctx context.Context, name string) error {
	want, err := e.s.w.fixtures().Handled(name)
	if err != nil {
		return err
	}
	return eventually(ctx, driverReady, func(ctx context.Context) error {
		got, err := e.handled(ctx, want.ID)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return fmt.Errorf("no handler received %s yet", want.ID)
		}
		return joinProblems(fixture.CompareEvent(want, got[0]))
	})
}

// theServerAdvisesItTerminated: the server's own advisory says the
// consumer terminated the scenario's last delivery at its first delivery,
// with a reason naming what the fixture says is refused.
func (e *events) theServerAdvisesItTerminated(ctx context.Context, consumer, name string) error {
	var f fixture.Delivery
	if err := e.s.w.fixtures().Read(name, &f); err != nil {
		return err
	}
	p, err := e.lastPublished()
	if err != nil {
		return err
	}
	if e.watch == nil {
		return errors.New("nothing listened for the server's advisories in this scenario")
	}
	ctx, cancel := context.WithTimeout(ctx, driverReady)
	defer cancel()
	a, err := e.watch.Await(ctx, consumer, p.seq)
	if err != nil {
		return err
	}
	part, ok := a.Part()
	switch {
	case !ok || part != f.Refused:
		return fmt.Errorf("expected %s to terminate stream sequence %d refusing %s, the server's advisory gives the reason %q", consumer, p.seq, f.Refused, a.Reason)
	case a.Deliveries != 1:
		return fmt.Errorf("expected %s refused at its first delivery, the server's advisory says at delivery %d", f.ID(), a.Deliveries)
	}
	beds.Logf(ctx, "terminated by %s: %s", consumer, a.Reason)
	return nil
}

func (e *events) noHandlerReceivedIt(ctx context.Context) error {
	p, err := e.lastPublished()
	if err != nil {
		return err
	}
	got, err := e.handled(ctx, p.id)
	if err != nil {
		return err
	}
	if len(got) > 0 {
		return fmt.Errorf("expected no handler to receive %s, got %v", p.id, got)
	}
	return nil
}

func (e *events) theHandlerReceivedItAsOftenAsItSays(ctx context.Context, name string) error {
	var f fixture.Delivery
	if err := e.s.w.fixtures().Read(name, &f); err != nil {
		return err
	}
	want, err := f.HandledCount()
	if err != nil {
		return fmt.Errorf("fixture %s: %w", name, err)
	}
	// Settled: every delivery of the scenario acknowledged (or terminated).
	if err := e.s.settledWithin(ctx, wire.ModuleConsumer(consumerNode, consumerModule), driverReady); err != nil {
		return err
	}
	got, err := e.handledAtLeast(ctx, f.ID(), want)
	if err != nil {
		return err
	}
	if len(got) != want {
		return fmt.Errorf("expected the handler to receive %s %d time(s) after %d deliveries, it received it %d time(s)", f.ID(), want, f.Deliveries, len(got))
	}
	return nil
}

func (e *events) theDeadStreamHoldsTheAdvisory(ctx context.Context, consumer string) error {
	p, err := e.lastPublished()
	if err != nil {
		return err
	}
	js, err := e.s.streamJetStream(ctx, wire.StreamDead)
	if err != nil {
		return err
	}
	return eventually(ctx, 2*time.Minute, func(ctx context.Context) error {
		a, err := observe.DeadLetter(ctx, js, consumer, p.seq)
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
func (e *events) theConsumerAcknowledgesIt(ctx context.Context, consumer string, seconds int) error {
	p, err := e.lastPublished()
	if err != nil {
		return err
	}
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		got, err := e.s.progress(ctx, consumer)
		if err != nil {
			return err
		}
		if !got.Acknowledged(p.seq) {
			return fmt.Errorf("expected %s to have acknowledged stream sequence %d, its ack floor is %d with %d pending (%d redelivered)",
				consumer, p.seq, got.AckFloor, got.AckPending, got.Redelivered)
		}
		return nil
	})
}

func (e *events) theHandlerReceivedItMoreThanOnce(ctx context.Context) error {
	p, err := e.lastPublished()
	if err != nil {
		return err
	}
	got, err := e.handledAtLeast(ctx, p.id, 2)
	if err != nil {
		return err
	}
	if len(got) < 2 {
		return fmt.Errorf("expected the handler to receive %s again after failing, it received it %d time(s)", p.id, len(got))
	}
	beds.Logf(ctx, "handled after %d deliveries", len(got))
	return nil
}

func (e *events) theDeadStreamHoldsNoAdvisory(ctx context.Context, consumer string) error {
	p, err := e.lastPublished()
	if err != nil {
		return err
	}
	js, err := e.s.streamJetStream(ctx, wire.StreamDead)
	if err != nil {
		return err
	}
	a, err := observe.DeadLetter(ctx, js, consumer, p.seq)
	if err != nil {
		return err
	}
	if a != nil {
		return fmt.Errorf("expected no max-deliveries advisory of %s for stream sequence %d, DEAD holds one after %d deliveries", consumer, p.seq, a.Deliveries)
	}
	return nil
}

func (e *events) theHandlerReceivedItMaxDeliverTimes(ctx context.Context) error {
	p, err := e.lastPublished()
	if err != nil {
		return err
	}
	progress, err := e.s.progress(ctx, wire.ModuleConsumer(consumerNode, consumerModule))
	if err != nil {
		return err
	}
	got, err := e.handledAtLeast(ctx, p.id, progress.MaxDeliver)
	if err != nil {
		return err
	}
	if want := progress.MaxDeliver; len(got) != want {
		return fmt.Errorf("expected the handler to receive %s %d time(s) (max-deliver), got %d", p.id, want, len(got))
	}
	return nil
}
