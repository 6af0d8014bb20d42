// Package build is the builder of design 25 §1 and §9 step 4 ("a build
// source's change reaching the builder"). Builders share the durable pull
// consumer wire.BuildsConsumer on BUILDS, which the controller creates
// with one delivery outstanding at a time; a builder binds it (never
// creates it), takes one wire.BuildRequest, fetches exactly that revision
// from its repository (wire.SourceFetch, a core request), assembles the
// artifact (Assemble: the toolchain's program for the module with the
// provenance after it), stores it in ARTIFACTS (artifact.Put), publishes
// the wire.Built outcome on CONTROL with the build's id as its message id,
// and only then acks the request.
//
// What can go wrong is told apart by whose it is:
//
//   - the build's (the repository has no such revision, the toolchain no
//     program for the module, the artifact too large): a "failed" outcome
//     that says why, recorded like a success, and the request acked;
//   - the request's (not a build request at all): terminated, with the
//     reason logged and given to the server;
//   - nobody's in particular (the repository away, the bus slow, the
//     builder stopping): the request is given back, after a delay (at once
//     when the builder stops), and built again later, by this builder or
//     another.
//
// A builder killed mid-build leaves its request unacked; the server
// delivers it again after the consumer's AckWait. Building is a function
// of the request, the revision's content and the toolchain's program, so
// the next builder makes the same artifact, stores the same chunks (the
// same message ids), and its outcome is a duplicate of any first one.
package build

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/wire"
)

// Defaults of Options.
const (
	// DefaultFetchTimeout bounds the wait for a repository's answer.
	DefaultFetchTimeout = 30 * time.Second
	// DefaultRetryDelay is how long a request given back waits before it
	// is delivered again.
	DefaultRetryDelay = 5 * time.Second
	// DefaultPoll bounds one wait for a request.
	DefaultPoll = 5 * time.Second
	// serverAckWait is the server's AckWait for a consumer that sets none.
	serverAckWait = 30 * time.Second
	// maxReason bounds a failed outcome's error, so that the outcome stays
	// within wire.MaxBuildMessage whatever a repository answered.
	maxReason = 1 << 10
)

// ErrOptions is wrapped by every refusal of Options.
var ErrOptions = errors.New("invalid builder options")

// Options configure Run.
type Options struct {
	// Conn is the builder's connection, dialled with its credential
	// (link.Dial sets the inbox prefix, wire.BuilderInbox, that its user
	// may subscribe, and the password, which keys the outcomes' message
	// ids: wire.BuiltMsgID). Run neither closes nor drains it.
	Conn *nats.Conn
	// Toolchain is the directory holding the program of each module it
	// can build, <Toolchain>/<module>, an executable file.
	Toolchain string
	// Name is the builder's name in the outcomes it publishes.
	Name string
	// Log receives the builder's lines; slog.Default() when nil.
	Log *slog.Logger
	// FetchTimeout, RetryDelay and Poll default to the Default* values.
	FetchTimeout time.Duration
	RetryDelay   time.Duration
	Poll         time.Duration
	// Now is the clock outcomes are stamped with; time.Now when nil.
	Now func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	if o.Conn == nil {
		return o, fmt.Errorf("%w: no connection", ErrOptions)
	}
	if o.Conn.Opts.Password == "" {
		// An outcome's id keyed with nothing is one anyone can publish first.
		return o, fmt.Errorf("%w: the connection has no password to key the outcomes' message ids with (dial it with the builder's credential)", ErrOptions)
	}
	if o.Name == "" {
		return o, fmt.Errorf("%w: no builder name", ErrOptions)
	}
	if fi, err := os.Stat(o.Toolchain); err != nil {
		return o, fmt.Errorf("%w: toolchain: %v", ErrOptions, err)
	} else if !fi.IsDir() {
		return o, fmt.Errorf("%w: toolchain %s is not a directory", ErrOptions, o.Toolchain)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// Run builds what BUILDS asks, one request at a time, until ctx ends
// (then it gives back the request in hand and returns nil) or the
// connection is closed (an error). It waits for the consumer while the
// controller has not created it.
func Run(ctx context.Context, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	js, err := jetstream.New(o.Conn)
	if err != nil {
		return fmt.Errorf("builder: %w", err)
	}
	cons, err := bind(ctx, js, o)
	if err != nil || cons == nil {
		return err
	}
	ackWait := cons.CachedInfo().Config.AckWait
	if ackWait <= 0 {
		ackWait = serverAckWait
	}
	b := &builder{o: o, js: js, beat: ackWait / 3}
	o.Log.Info("builder ready", "builder", o.Name, "toolchain", o.Toolchain, "ack_wait", ackWait.String())
	for {
		if ctx.Err() != nil {
			o.Log.Info("builder stopping", "builder", o.Name)
			return nil
		}
		if o.Conn.IsClosed() {
			return errors.New("builder: the connection is closed")
		}
		msg, err := next(ctx, cons, o.Poll)
		if err != nil {
			if errors.Is(err, nats.ErrConnectionClosed) {
				return fmt.Errorf("builder: %w", err)
			}
			o.Log.Warn("waiting for a build request failed", "err", err)
			pause(ctx, o.RetryDelay)
			continue
		}
		if msg != nil {
			b.handle(ctx, msg)
		}
	}
}

// bind binds the builders' consumer, sending only CONSUMER.INFO (the one
// JetStream API subject besides MSG.NEXT the builder is granted). It
// waits while the consumer is not there yet, and returns a nil consumer
// when ctx ends first.
func bind(ctx context.Context, js jetstream.JetStream, o Options) (jetstream.Consumer, error) {
	for {
		cons, err := js.Consumer(ctx, wire.StreamBuilds, wire.BuildsConsumer)
		switch {
		case err == nil:
			return cons, nil
		case ctx.Err() != nil:
			return nil, nil
		case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
			o.Log.Warn("the builders' consumer is not there yet; waiting for the controller", "stream", wire.StreamBuilds, "consumer", wire.BuildsConsumer, "err", err)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders):
			// A refused API request is dropped by the server, so a grant
			// missing looks like this too.
			o.Log.Warn("no answer binding the builders' consumer (is JetStream up, and is the builder granted its CONSUMER.INFO?)", "stream", wire.StreamBuilds, "consumer", wire.BuildsConsumer, "err", err)
		default:
			return nil, fmt.Errorf("builder: bind %s on %s: %w", wire.BuildsConsumer, wire.StreamBuilds, err)
		}
		pause(ctx, o.RetryDelay)
	}
}

// next waits up to poll for one request: nil, nil when none came.
func next(ctx context.Context, cons jetstream.Consumer, poll time.Duration) (jetstream.Msg, error) {
	pctx, cancel := context.WithTimeout(ctx, poll)
	defer cancel()
	msg, err := cons.Next(jetstream.FetchContext(pctx))
	if err == nil {
		return msg, nil
	}
	if ctx.Err() != nil || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoMessages) {
		return nil, nil
	}
	return nil, err
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

type builder struct {
	o    Options
	js   jetstream.JetStream
	beat time.Duration
}

// postponed says why a build is given back rather than judged: it is not
// the build's failure.
type postponed struct{ err error }

func (p postponed) Error() string { return p.err.Error() }
func (p postponed) Unwrap() error { return p.err }

// handle settles one delivery.
func (b *builder) handle(ctx context.Context, msg jetstream.Msg) {
	log := b.o.Log
	if meta, err := msg.Metadata(); err == nil {
		log = log.With("stream_seq", meta.Sequence.Stream, "delivery", meta.NumDelivered)
	}
	req, err := wire.ParseBuildRequest(msg.Data())
	if err != nil {
		log.Error("build request refused for good", "err", err)
		if err := msg.TermWithReason(clip(err.Error())); err != nil {
			log.Warn("terminate the request", "err", err)
		}
		return
	}
	log = log.With("build", req.ID)
	log.Info("build started")
	stop := heartbeat(msg, b.beat, log)
	out, err := b.build(ctx, req)
	if err == nil {
		err = b.record(ctx, out, log)
	}
	stop()
	switch {
	case err == nil:
		// Acked only now: a builder gone before this leaves the request to
		// the next, and the outcome above is then recorded once.
		// Even when the builder is stopping: the build is done.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := msg.DoubleAck(actx); err != nil {
			log.Warn("ack the request (it will come again; its outcome is recorded)", "err", err)
		}
	case ctx.Err() != nil:
		log.Info("build interrupted; the request is given back", "err", err)
		giveBack(msg, 0, b.o.Conn, log)
	default:
		log.Warn("build postponed", "err", err, "retry_in", b.o.RetryDelay.String())
		giveBack(msg, b.o.RetryDelay, b.o.Conn, log)
	}
}

// build builds req: an outcome, succeeded or failed, or an error when the
// build could not be judged and is to be tried again.
func (b *builder) build(ctx context.Context, req wire.BuildRequest) (wire.Built, error) {
	out := wire.Built{ID: req.ID, Repo: req.Repo, Module: req.Module, Revision: req.Revision, Builder: b.o.Name}
	fail := func(err error) (wire.Built, error) {
		out.Outcome, out.Error = wire.BuildFailed, clip(err.Error())
		return out, nil
	}
	program, err := readProgram(b.o.Toolchain, req.Module)
	if err != nil {
		return fail(err)
	}
	content, err := b.fetch(ctx, req)
	var p postponed
	if errors.As(err, &p) {
		return wire.Built{}, err
	}
	if err != nil {
		return fail(err)
	}
	data := Assemble(program, req, content)
	if len(data) > wire.MaxArtifact {
		return fail(fmt.Errorf("the artifact of revision %s of %s is %d bytes, over the limit of %d", req.Revision, req.Module, len(data), wire.MaxArtifact))
	}
	digest, chunks, err := artifact.Put(ctx, b.js, data)
	if err != nil {
		return wire.Built{}, postponed{err}
	}
	out.Outcome, out.Digest, out.Size, out.Chunks = wire.BuildSucceeded, digest, int64(len(data)), chunks
	return out, nil
}

// fetch asks the repository for exactly the revision. A postponed error
// is the repository away; any other is the build's failure.
func (b *builder) fetch(ctx context.Context, req wire.BuildRequest) ([]byte, error) {
	fctx, cancel := context.WithTimeout(ctx, b.o.FetchTimeout)
	defer cancel()
	subject := wire.SourceFetch(req.Repo)
	reply, err := b.o.Conn.RequestWithContext(fctx, subject, wire.Marshal(wire.FetchRequest{Module: req.Module, Revision: req.Revision}))
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, postponed{fmt.Errorf("repository %s is away (nobody answers on %s)", req.Repo, subject)}
	}
	if err != nil {
		return nil, postponed{fmt.Errorf("fetch revision %s of %s from repository %s: %w", req.Revision, req.Module, req.Repo, err)}
	}
	ans, err := wire.ParseFetchAnswer(reply.Data)
	if err != nil {
		return nil, fmt.Errorf("repository %s answered the fetch of revision %s of %s with a malformed answer: %w", req.Repo, req.Revision, req.Module, err)
	}
	if ans.Module != req.Module || ans.Revision != req.Revision {
		return nil, fmt.Errorf("repository %s answered with revision %q of %q when asked for revision %s of %s", req.Repo, ans.Revision, ans.Module, req.Revision, req.Module)
	}
	if ans.Error != "" {
		return nil, fmt.Errorf("revision %s of %s is not in repository %s: %s", req.Revision, req.Module, req.Repo, ans.Error)
	}
	return ans.Content, nil
}

// record publishes the outcome on CONTROL with the build's id, keyed with
// the builder's password, as its message id: the same build recorded
// twice within the stream's duplicate window is stored once, and no other
// principal can publish that id first.
func (b *builder) record(ctx context.Context, out wire.Built, log *slog.Logger) error {
	out.At = b.o.Now().UTC()
	data := wire.Marshal(out)
	// What the controller cannot read is not worth sending: a bug of ours,
	// never the build's.
	if _, err := wire.ParseBuilt(data); err != nil {
		return fmt.Errorf("outcome of %s: %w", out.ID, err)
	}
	ack, err := b.js.Publish(ctx, wire.SubjectBuilt, data,
		jetstream.WithMsgID(wire.BuiltMsgID(b.o.Conn.Opts.Password, out.ID)),
		jetstream.WithExpectStream(wire.StreamControl))
	if err != nil {
		return postponed{fmt.Errorf("publish the outcome of %s: %w", out.ID, err)}
	}
	if ack.Stream != wire.StreamControl {
		return postponed{fmt.Errorf("publish the outcome of %s: acknowledged by stream %q, not %s", out.ID, ack.Stream, wire.StreamControl)}
	}
	log.Info("build recorded", "outcome", out.Outcome, "digest", out.Digest, "size", out.Size, "chunks", out.Chunks,
		"error", out.Error, "control_seq", ack.Sequence, "duplicate", ack.Duplicate)
	return nil
}

// heartbeat tells the server every period that the delivery is still
// being worked on, so that it is not delivered to another builder while
// this one builds; stop ends it.
func heartbeat(msg jetstream.Msg, period time.Duration, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					log.Warn("tell the server the build is in progress", "err", err)
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// giveBack naks the delivery, to come again after delay, and flushes, so
// that a builder about to close its connection has said so first.
func giveBack(msg jetstream.Msg, delay time.Duration, nc *nats.Conn, log *slog.Logger) {
	var err error
	if delay > 0 {
		err = msg.NakWithDelay(delay)
	} else {
		err = msg.Nak()
	}
	if err == nil {
		err = nc.FlushTimeout(2 * time.Second)
	}
	if err != nil {
		log.Warn("give the request back (it comes again after the consumer's AckWait)", "err", err)
	}
}

// readProgram is the toolchain's program for module.
func readProgram(toolchain, module string) ([]byte, error) {
	fail := func(why string) error {
		return fmt.Errorf("toolchain %s has no program for module %s: %s", toolchain, module, why)
	}
	path := filepath.Join(toolchain, module) // module is a checked name: no separator, no dots
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fail("no file " + module)
	case err != nil:
		return nil, fail(err.Error())
	case !fi.Mode().IsRegular():
		return nil, fail(module + " is not a regular file")
	case fi.Mode().Perm()&0o111 == 0:
		return nil, fail(module + " is not executable")
	case fi.Size() > wire.MaxArtifact:
		return nil, fail(fmt.Sprintf("%s is %d bytes, over the artifact limit of %d", module, fi.Size(), wire.MaxArtifact))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fail(err.Error())
	}
	return data, nil
}

// clip cuts s to maxReason bytes, on a character boundary.
func clip(s string) string {
	if len(s) <= maxReason {
		return s
	}
	s = s[:maxReason]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.TrimSpace(s) + "…"
}
