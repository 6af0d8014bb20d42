// Package build is the builder of design 25 §1 and §9 step 4 ("a build
// source's change reaching the builder"). It speaks to the bus only
// through its role on the control plane's seam (plane.Builder: BUILDS and
// its consumer on NATS, the builds queue on AMQP, package buses picking by
// the credential's scheme): a builder takes one wire.BuildRequest at a
// time, fetches exactly that revision from its repository, assembles the
// artifact (Assemble: the toolchain's program for the module with the
// provenance after it), stores it where the hosts fetch it, sends the
// wire.Built outcome into CONTROL with a message id of the build's, and
// only then acks the request.
//
// What can go wrong is told apart by whose it is:
//
//   - the build's (the repository has no such revision, the toolchain no
//     program for the module, the artifact too large): a "failed" outcome
//     that says why, recorded like a success, and the request acked;
//   - the request's (not a build request at all): terminated, with the
//     reason logged and given to the bus;
//   - nobody's in particular (the repository away, the bus slow, the
//     builder stopping): the request is given back, after a delay (at once
//     when the builder stops), and built again later, by this builder or
//     another;
//   - the bus's: a flow the bus does not carry (plane.ErrUnsupported) ends
//     Run with an error naming it, the request given back.
//
// A builder killed mid-build leaves its request unacked; the bus delivers
// it again to another builder (NATS: after the consumer's AckWait; AMQP:
// when the connection is gone). Building is a function
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
	"time"
	"unicode/utf8"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
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
	// maxReason bounds a failed outcome's error, so that the outcome stays
	// within wire.MaxBuildMessage whatever a repository answered.
	maxReason = 1 << 10
)

// ErrOptions is wrapped by every refusal of Options.
var ErrOptions = errors.New("invalid builder options")

// Options configure Run.
type Options struct {
	// Bus is the builder connected as itself (buses.DialBuilder). Run
	// does not close it.
	Bus plane.Builder
	// Key is the builder's password, which keys the outcomes' message
	// ids (wire.BuiltMsgID): no other principal can send one first.
	Key string
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
	if o.Bus == nil {
		return o, fmt.Errorf("%w: no connection", ErrOptions)
	}
	if o.Key == "" {
		// An outcome's id keyed with nothing is one anyone can publish first.
		return o, fmt.Errorf("%w: no password to key the outcomes' message ids with (the builder's credential's)", ErrOptions)
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

// Run builds what the bus asks, one request at a time, until ctx ends
// (then it gives back the request in hand and returns nil), the
// connection is closed, or the bus does not carry a flow the build needs
// (an error). It waits for the builders' queue while the controller has
// not made it.
func Run(ctx context.Context, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	b := &builder{o: o}
	o.Log.Info("builder ready", "builder", o.Name, "toolchain", o.Toolchain)
	for {
		if ctx.Err() != nil {
			o.Log.Info("builder stopping", "builder", o.Name)
			return nil
		}
		msg, err := next(ctx, o.Bus, o.Poll)
		switch {
		case errors.Is(err, link.ErrClosed):
			return fmt.Errorf("builder: %w", err)
		case errors.Is(err, plane.ErrMissing):
			o.Log.Warn("the builders' queue is not there yet; waiting for the controller", "err", err)
		case err != nil:
			o.Log.Warn("waiting for a build request failed", "err", err)
		case msg != nil:
			if err := b.handle(ctx, msg); err != nil {
				return err
			}
			continue
		default:
			continue
		}
		pause(ctx, o.RetryDelay)
	}
}

// next waits up to poll for one request: nil, nil when none came.
func next(ctx context.Context, bus plane.BuildFeed, poll time.Duration) (plane.BuildMsg, error) {
	pctx, cancel := context.WithTimeout(ctx, poll)
	defer cancel()
	return bus.NextBuild(pctx)
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
	o Options
}

// postponed says why a build is given back rather than judged: it is not
// the build's failure.
type postponed struct{ err error }

func (p postponed) Error() string { return p.err.Error() }
func (p postponed) Unwrap() error { return p.err }

// handle settles one delivery; an error ends Run: the bus does not carry
// what the build needs.
func (b *builder) handle(ctx context.Context, msg plane.BuildMsg) error {
	log := b.o.Log.With("position", msg.Position(), "delivery", msg.Attempt())
	req, err := wire.ParseBuildRequest(msg.Data())
	if err != nil {
		log.Error("build request refused for good", "err", err)
		if err := msg.Term(clip(err.Error())); err != nil {
			log.Warn("terminate the request", "err", err)
		}
		return nil
	}
	log = log.With("build", req.ID)
	log.Info("build started")
	out, err := b.build(ctx, req)
	if err == nil {
		err = b.record(ctx, out, log)
	}
	switch {
	case err == nil:
		// Acked only now: a builder gone before this leaves the request to
		// the next, and the outcome above is then recorded once.
		// Even when the builder is stopping: the build is done.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := msg.Ack(actx); err != nil {
			log.Warn("ack the request (it will come again; its outcome is recorded)", "err", err)
		}
	case errors.Is(err, plane.ErrUnsupported):
		log.Error("the bus does not carry what the build needs; the request is given back", "err", err)
		giveBack(msg, 0, log)
		return fmt.Errorf("builder: %w", err)
	case ctx.Err() != nil:
		log.Info("build interrupted; the request is given back", "err", err)
		giveBack(msg, 0, log)
	default:
		log.Warn("build postponed", "err", err, "retry_in", b.o.RetryDelay.String())
		giveBack(msg, b.o.RetryDelay, log)
	}
	return nil
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
	digest, chunks, err := b.o.Bus.PutArtifact(ctx, data)
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
	reply, err := b.o.Bus.FetchRevision(fctx, req.Repo, wire.Marshal(wire.FetchRequest{Module: req.Module, Revision: req.Revision}))
	if errors.Is(err, plane.ErrNoAnswerer) {
		return nil, postponed{fmt.Errorf("repository %s is away: %w", req.Repo, err)}
	}
	if err != nil {
		return nil, postponed{fmt.Errorf("fetch revision %s of %s from repository %s: %w", req.Revision, req.Module, req.Repo, err)}
	}
	ans, err := wire.ParseFetchAnswer(reply)
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

// record sends the outcome into CONTROL with the build's id, keyed with
// the builder's password, as its message id: the same build recorded
// twice is kept once (NATS: within the stream's duplicate window; then the
// controller's ledger), and no other principal can send that id first.
func (b *builder) record(ctx context.Context, out wire.Built, log *slog.Logger) error {
	out.At = b.o.Now().UTC()
	data := wire.Marshal(out)
	// What the controller cannot read is not worth sending: a bug of ours,
	// never the build's.
	if _, err := wire.ParseBuilt(data); err != nil {
		return fmt.Errorf("outcome of %s: %w", out.ID, err)
	}
	if err := b.o.Bus.Built(ctx, wire.BuiltMsgID(b.o.Key, out.ID), data); err != nil {
		return postponed{fmt.Errorf("send the outcome of %s: %w", out.ID, err)}
	}
	log.Info("build recorded", "outcome", out.Outcome, "digest", out.Digest, "size", out.Size, "chunks", out.Chunks, "error", out.Error)
	return nil
}

// giveBack gives the request back, to come again after delay.
func giveBack(msg plane.BuildMsg, delay time.Duration, log *slog.Logger) {
	if err := msg.Hold(delay); err != nil {
		log.Warn("give the request back (the bus gives it again once this builder is gone)", "err", err)
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
