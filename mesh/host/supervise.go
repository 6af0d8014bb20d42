package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// How a module that crashes is started again: after restartMin, twice as
// long each time it crashes again within stableAfter of starting, up to
// restartMax. A module stopped gets stopGrace to end before it is killed.
const (
	restartMin  = 500 * time.Millisecond
	restartMax  = 30 * time.Second
	stableAfter = 30 * time.Second
	stopGrace   = 10 * time.Second
)

// ProcessName is what a module's process is called in the node's
// process list.
func ProcessName(module string) string { return "mesh-module-" + module }

// DefaultProgram is the program run for a module that has none of its
// own: no artifact installed for it, and none of its name in the
// programs directory. In the beds it is a stand-in that connects with
// the module's credential and stays up.
const DefaultProgram = "default"

// HostProgram is the host's own name in the beds' image, whose programs
// directory is its root.
const HostProgram = "mesh-host"

// supervisor runs each declared module as its own process, as its own
// OS identity, with its own credential file (ADR 0047), and starts one
// that ends again with backoff, until it is no longer declared.
type supervisor struct {
	programs string // the modules' programs: <programs>/<module>, else DefaultProgram
	state    State
	ids      *identities
	node     string
	log      *slog.Logger

	mu    sync.Mutex
	procs map[string]*supervised // by module
}

// supervised is one module's process, started again while it is declared.
type supervised struct {
	version string
	config  []byte // the configuration declared (wire.Declaration.Config), if any
	program string // the artifact installed as its program (its digest), if any
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	pid     int
	// credential is the credential file as the process was last started
	// with: one kept since (a cutover's switch to another bus) starts it
	// again, on the new one.
	credential []byte
}

// credentialChanged says whether module's credential file is not the one
// its process was started with.
func (s *supervisor) credentialChanged(module string, p *supervised) bool {
	now, err := os.ReadFile(s.state.ModuleCredential(module))
	if err != nil {
		return false // none kept: the process waits for it as it is
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.credential != nil && !bytes.Equal(now, p.credential)
}

// program is the path of module's program — its installed artifact when
// the declaration names one (installed), else its own in the programs
// directory, else DefaultProgram — or an error saying none is there.
func (s *supervisor) program(module string, installed bool) (string, error) {
	if installed {
		p := s.state.ModuleProgram(module)
		if !isProgram(p) {
			return "", fmt.Errorf("module %s's artifact is not installed at %s", module, p)
		}
		return p, nil
	}
	for _, name := range []string{module, DefaultProgram} {
		p := filepath.Join(s.programs, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return p, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("no program for module %s in %s (neither %s nor %s)", module, s.programs, module, DefaultProgram)
}

// identity is module's, allotted on first use.
func (s *supervisor) identity(module string) (*Identity, error) {
	id, err := s.ids.of(module)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// preflight says why modules cannot run here as identities of their own,
// or nil: the host may change identity, and another user can reach the
// programs and the state directory (whose own mode the host sets).
func preflight(programs string, state State) error {
	if err := canIsolate(); err != nil {
		return err
	}
	if err := reachable(filepath.Join(programs, DefaultProgram)); err != nil {
		return err
	}
	return reachable(state.Dir)
}

// set makes the running modules the declaration's: one not running is
// started, one whose version, configuration, program or credential
// changed started again, one no longer declared stopped. It returns once every process it stops has ended.
func (s *supervisor) set(d wire.Declaration) error {
	for _, mod := range d.Modules {
		if slices.Contains(wire.ReservedModuleNames, mod) {
			return fmt.Errorf("module %s: the name is reserved (%v)", mod, wire.ReservedModuleNames)
		}
		if _, err := s.program(mod, d.Artifacts[mod].Digest != ""); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if s.procs == nil {
		s.procs = map[string]*supervised{}
	}
	var stopping []*supervised
	var gone []string
	for mod, p := range s.procs {
		if !slices.Contains(d.Modules, mod) || p.version != d.Versions[mod] || !bytes.Equal(p.config, d.Config[mod]) || p.program != d.Artifacts[mod].Digest ||
			s.credentialChanged(mod, p) {
			stopping = append(stopping, p)
			delete(s.procs, mod)
		}
		if !slices.Contains(d.Modules, mod) {
			gone = append(gone, mod)
		}
	}
	for _, mod := range d.Modules {
		if _, ok := s.procs[mod]; !ok {
			s.procs[mod] = s.start(mod, d.Versions[mod], d.Config[mod])
			s.procs[mod].program = d.Artifacts[mod].Digest
		}
	}
	s.mu.Unlock()
	for _, p := range stopping {
		p.cancel()
		<-p.done
	}
	for _, mod := range gone {
		// Its configuration goes with it; a start again writes it anew.
		if _, err := s.state.putModuleConfig(mod, nil, nil); err != nil {
			s.log.Warn("the configuration of a module no longer declared is left", "module", mod, "err", err)
		}
	}
	return nil
}

// stopAll stops every module, as the host ends.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	procs := slices.Collect(maps.Values(s.procs))
	s.procs = nil
	s.mu.Unlock()
	for _, p := range procs {
		p.cancel()
		<-p.done
	}
}

// startWithin bounds the wait for the processes of a declaration just
// applied to be up, so that the report made then says what runs.
const startWithin = 5 * time.Second

// started waits until every module's process is up, or d passes.
func (s *supervisor) started(modules []string, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		up := s.running()
		if !slices.ContainsFunc(modules, func(m string) bool { _, ok := up[m]; return !ok }) {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded by the deadline
	}
}

// running are the modules whose process is up, with their versions.
func (s *supervisor) running() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for mod, p := range s.procs {
		p.mu.Lock()
		if p.pid != 0 {
			out[mod] = p.version
		}
		p.mu.Unlock()
	}
	return out
}

func (s *supervisor) start(module, version string, config []byte) *supervised {
	ctx, cancel := context.WithCancel(context.Background())
	p := &supervised{version: version, config: config, cancel: cancel, done: make(chan struct{})}
	log := s.log.With("module", module, "version", version)
	go func() {
		defer close(p.done)
		wait := restartMin
		for {
			started := time.Now()
			err := s.runOnce(ctx, p, module)
			if ctx.Err() != nil {
				return
			}
			if time.Since(started) > stableAfter {
				wait = restartMin
			}
			log.Warn("module ended; starting it again", "in", wait, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, restartMax)
		}
	}()
	return p
}

// runOnce runs the module's program until it ends or ctx does (then it is
// asked to stop with SIGTERM, and killed after stopGrace): as the
// module's own identity, in its home, with an environment made for it
// rather than the host's.
func (s *supervisor) runOnce(ctx context.Context, p *supervised, module string) error {
	path, err := s.program(module, p.program != "")
	if err != nil {
		return err
	}
	id, err := s.identity(module)
	if err != nil {
		return err
	}
	if err := s.state.prepareModule(module, *id); err != nil {
		return err
	}
	cmd := exec.Command(path)
	// Named for its module in the process list.
	cmd.Args = []string{ProcessName(module)}
	cmd.SysProcAttr = processAs(*id)
	cmd.Dir = s.state.ModuleHome(module)
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + cmd.Dir,
		wire.EnvCredential + "=" + s.state.ModuleCredential(module),
		wire.EnvNode + "=" + s.node,
		wire.EnvModule + "=" + module,
	}
	if config, err := s.state.putModuleConfig(module, p.config, id); err != nil {
		return err
	} else if config != "" {
		cmd.Env = append(cmd.Env, wire.EnvConfig+"="+config)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	credential, _ := os.ReadFile(s.state.ModuleCredential(module))
	if err := cmd.Start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.pid, p.credential = cmd.Process.Pid, credential
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.pid = 0
		p.mu.Unlock()
	}()
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-ended:
			return err
		case <-time.After(stopGrace):
			_ = cmd.Process.Kill()
			return <-ended
		}
	}
}
