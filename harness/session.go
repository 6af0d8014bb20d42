package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/moby/moby/client"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/owner"
)

// Labels on everything a session creates: package owner's, which find
// what Close removes and what reaping may remove, and the role.
const (
	LabelHarness  = owner.LabelHarness
	LabelRun      = owner.LabelRun
	LabelPID      = owner.LabelPID
	LabelPIDStart = owner.LabelPIDStart
	LabelHost     = owner.LabelHost
	LabelRole     = "mesh.role"
)

// closeTimeout bounds a Close started by CloseOnCancel, which has no
// caller's context to honour.
const closeTimeout = time.Minute

// SessionOptions configures a Session.
type SessionOptions struct {
	// Root is the checkout the images are built from. Empty: the nearest
	// directory above the working directory holding go.mod.
	Root string
	// WorkDir holds the run's state, JetStream store and descriptions. It
	// is created if missing and kept after Close: the caller owns it.
	// Empty: a fresh temporary directory, removed by Close.
	WorkDir string
	// LogDir receives testcontainers-go's own log for the run. Empty:
	// <work>/logs.
	LogDir string
	// Out receives the narration (one line per phase). Nil: discarded.
	Out io.Writer
	// Images, when set, is the run's record of the images it has made
	// sure of (images.Builder.Once), shared by its sessions: the first
	// cluster of a run checks its images against the checkout (and builds
	// what is missing or stale), the later ones take them as they are.
	Images *images.Ensured
	// Pool, when set, is the run's pool of recycled brokers and stores: a
	// cluster takes a recycled one rather than starting its own, and its
	// Close hands it back. Nil: every cluster starts its own and removes
	// them.
	Pool *Pool
}

// Session is one run of the harness: its id, its labels, its directories,
// and every container and network it creates. Its methods are safe for
// concurrent use.
type Session struct {
	id      string
	root    string
	work    string
	ownWork bool
	logDir  string
	out     io.Writer
	docker  *client.Client
	labels  map[string]string
	tcLog   tclog.Logger
	tcFile  *os.File
	builder *images.Builder
	pool    *Pool

	closeMu sync.Mutex // serialises Close, so a signal's Close and a deferred one do not race

	mu         sync.Mutex
	closed     bool
	containers []*Handle
	roles      map[string]int
	// pooled are the members the session has of the Pool: its Close hands
	// them back or removes them, since their labels are the pool's.
	pooled []pooledMember
	// execs are the outputs of the commands run in running containers
	// (docker exec), by the role a one-shot container running the same
	// command would have had, for SaveLogs.
	execs []execOutput
}

// execOutput is what a command run in a running container printed.
type execOutput struct {
	role, output string
}

// NewSession starts a run: it connects to Docker, removes what dead runs
// left behind, and prepares the work and log directories.
func NewSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	docker, err := dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	s := &Session{
		id:     newRunID(),
		out:    opts.Out,
		docker: docker,
		roles:  map[string]int{},
		pool:   opts.Pool,
	}
	if s.out == nil {
		s.out = io.Discard
	}
	s.labels = owner.Labels(s.id)

	// What a dead run left and could not be removed is its own, not
	// this run's, which names everything anew: said, and tried again by
	// the next run, as the container tests' owner.Claim does. A network
	// the engine itself holds on to ("has active endpoints" with nothing
	// attached, a Docker 20.10 engine after a bed's teardown; only a
	// restart of the engine lets it go) once failed every later raise.
	if err := s.reap(ctx); err != nil {
		s.narrate("warning: %v", err)
	}

	if s.root, err = findRoot(opts.Root); err != nil {
		docker.Close()
		return nil, err
	}
	if err := s.makeDirs(opts); err != nil {
		docker.Close()
		return nil, err
	}
	s.builder = &images.Builder{Root: s.root, Out: s.out, Tag: images.TagFromEnv(os.Getenv), Once: opts.Images}
	return s, nil
}

func (s *Session) makeDirs(opts SessionOptions) error {
	var err error
	if opts.WorkDir == "" {
		if s.work, err = os.MkdirTemp("", "mesh-"+s.id+"-"); err != nil {
			return fmt.Errorf("create work dir: %w", err)
		}
		s.ownWork = true
	} else {
		if s.work, err = filepath.Abs(opts.WorkDir); err != nil {
			return fmt.Errorf("resolve work dir: %w", err)
		}
		if err := os.MkdirAll(s.work, 0o755); err != nil {
			return fmt.Errorf("create work dir: %w", err)
		}
	}
	s.logDir = opts.LogDir
	if s.logDir == "" {
		s.logDir = filepath.Join(s.work, "logs")
	}
	if s.logDir, err = filepath.Abs(s.logDir); err != nil {
		return fmt.Errorf("resolve log dir: %w", err)
	}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	// testcontainers-go narrates every container in detail; that belongs
	// in the evidence, not in the runner's progress.
	s.tcFile, err = os.OpenFile(filepath.Join(s.logDir, "testcontainers.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open testcontainers log: %w", err)
	}
	s.tcLog = log.New(s.tcFile, "", log.LstdFlags|log.Lmicroseconds)
	return nil
}

// ID is the run id, short and random; it names the networks and containers.
func (s *Session) ID() string { return s.id }

// Labels are the labels on everything the session creates (a copy).
func (s *Session) Labels() map[string]string { return maps.Clone(s.labels) }

// WorkDir is the run's work directory.
func (s *Session) WorkDir() string { return s.work }

// LogDir is the run's log directory.
func (s *Session) LogDir() string { return s.logDir }

// Root is the checkout the images are built from.
func (s *Session) Root() string { return s.root }

// Close removes every container and network labelled with the run id —
// including any whose creation failed half way and that the session never
// tracked — and the work directory if the session made it. It attempts
// everything and returns every failure (a multierror, first one first).
// It is idempotent and safe to call concurrently, from a signal path too.
func (s *Session) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()

	var result *multierror.Error
	for _, p := range s.takePooled() {
		if err := s.pool.giveBack(ctx, p.role, p.m, p.h, s.narrate); err != nil {
			result = multierror.Append(result, err)
		}
	}
	if err := owner.Remove(ctx, s.docker, LabelRun+"="+s.id); err != nil {
		result = multierror.Append(result, err)
	}
	if s.ownWork && result.ErrorOrNil() == nil {
		// Containers write into the binds as this process's user, so the
		// whole tree is ours to remove.
		if err := os.RemoveAll(s.work); err != nil {
			result = multierror.Append(result, fmt.Errorf("remove work dir: %w", err))
		}
	}
	if err := s.builder.Close(); err != nil {
		result = multierror.Append(result, fmt.Errorf("close image builder: %w", err))
	}
	if s.tcFile != nil {
		if err := s.tcFile.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			result = multierror.Append(result, fmt.Errorf("close testcontainers log: %w", err))
		}
	}
	// Only idle connections are closed: the client stays usable, so a
	// second Close (or a late SaveLogs) still works.
	_ = s.docker.Close()
	return result.ErrorOrNil()
}

// CloseOnCancel arranges for Close to run, bounded by its own timeout, as
// soon as ctx is done — typically the context of signal.NotifyContext for
// SIGINT and SIGTERM. The Close runs in its own goroutine, so it happens
// even while the runner is blocked. The returned release stops the
// arrangement (call it when the run ends normally or is kept with --keep);
// it reports whether it stopped the Close from starting.
func (s *Session) CloseOnCancel(ctx context.Context) (release func() bool) {
	return context.AfterFunc(ctx, func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := s.Close(cctx); err != nil {
			fmt.Fprintf(s.out, "run %s: cleanup after cancel: %v\n", s.id, err)
			return
		}
		fmt.Fprintf(s.out, "run %s: cancelled; containers and networks removed\n", s.id)
	})
}

// pooledMember is a member of the Pool, its role, and the session's
// handle on it.
type pooledMember struct {
	role string
	m    recyclable
	h    *Handle
}

// setPooled records a member the session has of the Pool.
func (s *Session) setPooled(role string, m recyclable, h *Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pooled = append(s.pooled, pooledMember{role: role, m: m, h: h})
}

// takePooled takes the session's members of the Pool, once.
func (s *Session) takePooled() []pooledMember {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pooled
	s.pooled = nil
	return p
}

// isClosed reports whether Close has begun.
func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// narrate writes one line of progress.
func (s *Session) narrate(format string, args ...any) {
	fmt.Fprintf(s.out, format+"\n", args...)
}

// roleName returns a fresh role for a container of kind base: base
// itself the first time, then base-2, base-3 …
func (s *Session) roleName(base string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roles[base]++
	if n := s.roles[base]; n > 1 {
		return base + "-" + strconv.Itoa(n)
	}
	return base
}

// containerName is the Docker name of the container playing role.
func (s *Session) containerName(role string) string {
	return "mesh-" + s.id + "-" + role
}

// newRunID returns 6 random hex digits: short enough to type, random
// enough that two runs on one engine do not meet.
func newRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// findRoot returns root made absolute, or the nearest directory at or
// above the working directory that holds go.mod.
func findRoot(root string) (string, error) {
	if root != "" {
		return filepath.Abs(root)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find checkout root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find checkout root: no go.mod at or above the working directory")
		}
		dir = parent
	}
}
