package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// reloadAllowance is what "within one watcher-poll interval" allows on
// top of the interval itself: the server re-reading its configuration
// and checking one bcrypt hash on the new user's first login.
const reloadAllowance = time.Second

// loginWatch bounds the background wait for a new user's first login.
const loginWatch = time.Minute

func (s *scenario) bindServer(sc *godog.ScenarioContext) {
	sc.Step(`^a mesh raised from nothing from "([^"]+)"$`, s.aMeshRaisedFromNothing)
	sc.Step(`^a mesh raised from nothing from "([^"]+)" on (nats|amqp)$`, s.aMeshRaisedFromNothingOn)
	sc.Step(`^a mesh raised from nothing from "([^"]+)" on (nats|amqp), with its build path$`, s.aMeshWithItsBuildPath)
	sc.Step(`^a probe on the (private|outside) network asks "([^"]+)"$`, s.aProbeAsks)
	sc.Step(`^a probe on the (private|outside) network connects to "([^"]+)"$`, s.aProbeConnects)
	sc.Step(`^it is answered with status (\d+)$`, s.itIsAnsweredWithStatus)
	sc.Step(`^its connection is refused$`, s.itsConnectionIsRefused)
	sc.Step(`^it connects$`, s.itConnects)
	sc.Step(`^I note the nats container's id, start time and server process$`, s.iNoteTheNATSContainer)
	sc.Step(`^the controller applies "([^"]+)", which issues the person "([^"]+)" and revokes "([^"]+)"$`, s.theControllerApplies)
	sc.Step(`^the person "([^"]+)" connects within one watcher-poll interval of the configuration being written$`, s.personConnectsWithinOnePoll)
	sc.Step(`^the nats container is the same container, started at the same time, running the same server process$`, s.theNATSContainerIsTheSame)
	sc.Step(`^the server reloaded its configuration without restarting$`, s.theServerReloadedWithoutRestarting)
}

func (s *scenario) aMeshRaisedFromNothing(ctx context.Context, file string) error {
	// The bed says what its cluster is made of (beds.Bed.Topology).
	top := topology.Genesis()
	if b, _, ok := beds.Current(ctx); ok {
		top = b.TopologyOrDefault()
	}
	r, err := s.w.acquire(ctx, s.w.path(file), top, beds.ArtifactDir(ctx))
	if err != nil {
		return err
	}
	s.r = r
	return s.noteAsRaised(ctx)
}

func (s *scenario) aProbeAsks(ctx context.Context, network, url string) error {
	return s.runProbe(ctx, network, "http", url)
}

func (s *scenario) aProbeConnects(ctx context.Context, network, hostport string) error {
	return s.runProbe(ctx, network, "tcp", hostport)
}

func (s *scenario) runProbe(ctx context.Context, network string, args ...string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	which := harness.Private
	if network == "outside" {
		which = harness.Outside
	}
	s.probe, err = r.cluster.Probe(ctx, which, args...)
	return err
}

func (s *scenario) itIsAnsweredWithStatus(status int) error {
	if !s.probe.OK || s.probe.Status != status {
		return fmt.Errorf("expected an answer with status %d, got %+v", status, s.probe)
	}
	return nil
}

func (s *scenario) itsConnectionIsRefused() error {
	if s.probe.OK {
		return fmt.Errorf("expected the connection to be refused, got an answer: %+v", s.probe)
	}
	if !strings.Contains(s.probe.Error, "refused") {
		return fmt.Errorf("expected the connection to be refused, got: %s", s.probe.Error)
	}
	return nil
}

func (s *scenario) itConnects() error {
	if !s.probe.OK {
		return fmt.Errorf("expected the connection to be accepted, got: %s", s.probe.Error)
	}
	return nil
}

// natsIdentity is what says "the same server": the container, its start,
// the nats-server process inside it, and the server's own start time.
type natsIdentity struct {
	id        string
	startedAt time.Time
	serverPID int
	varz      observe.Varz
}

// varz is the part of the server's /varz the bed reads.
func (s *scenario) natsIdentity(ctx context.Context) (natsIdentity, error) {
	r, err := s.cluster()
	if err != nil {
		return natsIdentity{}, err
	}
	c, err := r.cluster.Member(harness.MemberBus)
	if err != nil {
		return natsIdentity{}, err
	}
	st, err := c.Inspect(ctx)
	if err != nil {
		return natsIdentity{}, err
	}
	procs, err := c.Processes(ctx)
	if err != nil {
		return natsIdentity{}, err
	}
	id := natsIdentity{id: c.ID(), startedAt: st.StartedAt}
	byPID := map[int]string{}
	for _, p := range procs {
		byPID[p.PID] = p.Command
	}
	var ok bool
	if id.serverPID, ok = observe.ServerPID(byPID); !ok {
		return natsIdentity{}, fmt.Errorf("expected one nats-server process in the nats container, got %+v", procs)
	}
	id.varz, err = s.readVarz(ctx)
	return id, err
}

// monitor asks the monitoring endpoint, from the private network, and
// returns the body of its answer.
func (s *scenario) monitor(ctx context.Context, url string) ([]byte, error) {
	res, err := s.r.cluster.Probe(ctx, harness.Private, "http", url)
	if err != nil {
		return nil, err
	}
	if res.Status != 200 {
		return nil, fmt.Errorf("ask %s: %+v", url, res)
	}
	return []byte(res.Body), nil
}

func (s *scenario) readVarz(ctx context.Context) (observe.Varz, error) {
	body, err := s.monitor(ctx, observe.VarzURL(s.r.mesh.Bus.Monitor, s.r.mesh.Bus.MonitorPort))
	if err != nil {
		return observe.Varz{}, err
	}
	return observe.ParseVarz(body)
}

// connections are, for each connection of user in state (open or
// closed), why it was closed ("" for an open one).
func (s *scenario) connections(ctx context.Context, state, user string) ([]string, error) {
	body, err := s.monitor(ctx, observe.ConnzURL(s.r.mesh.Bus.Monitor, s.r.mesh.Bus.MonitorPort, state))
	if err != nil {
		return nil, err
	}
	return observe.ConnectionReasons(body, user)
}

func (s *scenario) iNoteTheNATSContainer(ctx context.Context) error {
	id, err := s.natsIdentity(ctx)
	s.before = id
	return err
}

func (s *scenario) theControllerApplies(ctx context.Context, file, issued, revoked string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	// The sentence says what the new description changes: check it does.
	changed, err := meshdesc.Load(s.w.path(file))
	if err != nil {
		return err
	}
	if err := personsDiffer(r.mesh, changed, issued, revoked); err != nil {
		return err
	}
	// Keep the credentials apply is about to delete.
	s.revoked = map[string]savedCredential{}
	for _, p := range r.mesh.Persons {
		if cred, err := r.cluster.Credential(ctx, wire.PersonUser(p.Name)); err == nil {
			s.revoked[p.Name] = cred
		}
	}

	r.tainted = true
	name := filepath.Base(file)
	if err := r.cluster.StageFile(s.w.path(file), name); err != nil {
		return err
	}
	// Apply writes the new credentials before the configuration: try the
	// issued person's login from the moment its credential appears, so
	// that the first accepted login measures the reload, not this step.
	s.firstLogin = s.watchFirstLogin(ctx, wire.PersonUser(issued))
	if err := r.cluster.Apply(ctx, name); err != nil {
		return err
	}
	conf, err := capability[harness.NATSConfig](r)
	if err != nil {
		return err
	}
	fi, err := os.Stat(conf.NATSConfigFile())
	if err != nil {
		return err
	}
	s.written = fi.ModTime()
	return nil
}

// login is the outcome of watchFirstLogin.
type login struct {
	c   *client
	at  time.Time
	err error
}

// watchFirstLogin waits for user's credential file and then logs in as
// user until the server accepts, in the background.
func (s *scenario) watchFirstLogin(ctx context.Context, user string) <-chan login {
	done := make(chan login, 1)
	cluster := s.r.cluster
	// The watch outlives this step; it is bounded by loginWatch instead.
	ctx = context.WithoutCancel(ctx)
	go func() {
		var cred wire.Credential
		err := eventually(ctx, loginWatch, func(context.Context) error {
			var err error
			cred, err = cluster.Credential(ctx, user)
			return err
		})
		if err != nil {
			done <- login{err: err}
			return
		}
		var c *client
		err = eventually(ctx, loginWatch, func(ctx context.Context) error {
			var err error
			c, err = s.dial(ctx, cred)
			return err
		})
		done <- login{c: c, at: time.Now(), err: err}
	}()
	return done
}

// personsDiffer checks that after differs from before exactly by issuing
// one person and revoking another.
func personsDiffer(before, after *meshdesc.Mesh, issued, revoked string) error {
	names := func(m *meshdesc.Mesh) []string {
		var out []string
		for _, p := range m.Persons {
			out = append(out, p.Name)
		}
		return out
	}
	b, a := names(before), names(after)
	if slices.Contains(b, issued) || !slices.Contains(a, issued) {
		return fmt.Errorf("expected the description to issue %q: persons before %v, after %v", issued, b, a)
	}
	if !slices.Contains(b, revoked) || slices.Contains(a, revoked) {
		return fmt.Errorf("expected the description to revoke %q: persons before %v, after %v", revoked, b, a)
	}
	return nil
}

func (s *scenario) personConnectsWithinOnePoll(ctx context.Context, person string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	if s.firstLogin == nil {
		return errors.New("no configuration change applied in this scenario")
	}
	var l login
	select {
	case l = <-s.firstLogin:
	case <-ctx.Done():
		return ctx.Err()
	}
	if l.err != nil {
		return fmt.Errorf("expected %s to connect after the change: %w", person, l.err)
	}
	s.clients[wire.PersonUser(person)] = l.c
	latency := l.at.Sub(s.written)
	limit := r.poll + reloadAllowance
	beds.Measure(ctx, "reload latency (configuration written → new user accepted)", latency)
	beds.Logf(ctx, "reload latency %s with a %s watcher poll", latency.Round(time.Millisecond), r.poll)
	if latency > limit {
		return fmt.Errorf("expected %s to connect within %s (poll %s + %s) of the configuration being written, it took %s", person, limit, r.poll, reloadAllowance, latency)
	}
	return nil
}

func (s *scenario) theNATSContainerIsTheSame(ctx context.Context) error {
	now, err := s.natsIdentity(ctx)
	if err != nil {
		return err
	}
	var diffs []string
	if now.id != s.before.id {
		diffs = append(diffs, fmt.Sprintf("container id %s, was %s", now.id[:12], s.before.id[:12]))
	}
	if !now.startedAt.Equal(s.before.startedAt) {
		diffs = append(diffs, fmt.Sprintf("started at %s, was %s", now.startedAt, s.before.startedAt))
	}
	if now.serverPID != s.before.serverPID {
		diffs = append(diffs, fmt.Sprintf("nats-server pid %d, was %d", now.serverPID, s.before.serverPID))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("expected the same nats container and server process: %s", strings.Join(diffs, "; "))
	}
	return nil
}

func (s *scenario) theServerReloadedWithoutRestarting(ctx context.Context) error {
	v, err := s.readVarz(ctx)
	if err != nil {
		return err
	}
	change := v.Since(s.before.varz)
	if change.Restarted {
		return fmt.Errorf("expected the server's start time to be unchanged, was %s, now %s", s.before.varz.Start, v.Start)
	}
	if !change.Reloaded {
		return fmt.Errorf("expected the server to have loaded its configuration again, load time still %s", v.ConfigLoadTime)
	}
	return nil
}
