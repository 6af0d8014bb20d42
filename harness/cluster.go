package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/meshbus/mesh/harness/controllerctr"
	"github.com/meshbus/mesh/harness/nats"
	"github.com/meshbus/mesh/harness/owner"
	"github.com/meshbus/mesh/harness/postgres"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/controller/statedir"
)

// Networks of a cluster, as Probe and NetworkName name them
// (topology.Private, topology.Outside).
const (
	// Private is the mesh's own network: every container is on it.
	Private = topology.Private
	// Outside stands outside the mesh: only the bus's client port is
	// meant to be reachable from it.
	Outside = topology.Outside
)

// Aliases by which the containers are reached on the networks.
const (
	AliasNATS        = "nats"
	AliasNATSOutside = "nats-outside"
	AliasController  = "controller"
)

// DefaultPoll is how often the nats entrypoint polls its configuration
// when GenesisOptions.Poll is zero: a quarter of its own default
// (mesh-nats --poll, a second), since every composition the beds wait on
// (a token issued, a node enrolled, a push) is loaded at the next poll.
// A poll reads and hashes nats.conf, a few kilobytes.
const DefaultPoll = 250 * time.Millisecond

// GenesisOptions configures RaiseGenesis.
type GenesisOptions struct {
	// MeshFile is the host path of the mesh description to raise.
	MeshFile string
	// Poll is how often the nats entrypoint polls nats.conf. Zero:
	// DefaultPoll.
	Poll time.Duration
	// ReadyTimeout bounds each container's wait for readiness and each
	// one-shot's run. Zero: one minute.
	ReadyTimeout time.Duration
	// Topology is what to raise; zero is topology.Genesis(). A topology
	// that does not check is refused before anything is created.
	Topology topology.Topology
}

// Cluster is a mesh raised in containers: the networks, the nats
// container, the controller container, and the host directories bound
// into them. Step definitions observe it from outside through its methods.
type Cluster struct {
	s            *Session
	images       imageSet
	state        string // host dir bound at /var/lib/mesh
	meshDir      string // host dir bound at /mesh
	js           string // host dir bound at /data in nats
	poll         time.Duration
	readyTimeout time.Duration
	networks     map[string]string // Private/Outside -> Docker network name
	nats         *nats.NATSContainer
	topology     topology.Topology
	// store is the controller's PostgreSQL when the topology has one, and
	// storeURL its URL on the private network, given to every controller
	// container; "" keeps the state in the state directory's files.
	store    *postgres.PostgresContainer
	storeURL string

	mu         sync.Mutex
	roles      map[string]*Handle
	enrolments map[string]Enrolment // by node
	faults     map[string]injected  // by member
	busAddr    string               // as of the last BusAddress, for Describe
	amqp       *AMQPBus             // once raised
	// predecessor is the predecessor's user on the broker, given it with
	// the broker when the topology has a predecessor, and its container
	// once raised.
	predecessor    predecessorOf
	predecessorCtr *testcontainers.DockerContainer
	beside         *NATSBeside // once raised
}

// RaiseGenesis raises the genesis cluster of the description
// opts.MeshFile: images, networks, the state minted by `mesh-controller
// genesis`, the nats container, the controller container. It narrates
// each phase with its time. On error, what was created stays until Close,
// so the caller can SaveLogs first.
func (s *Session) RaiseGenesis(ctx context.Context, opts GenesisOptions) (*Cluster, error) {
	c := &Cluster{
		s:            s,
		state:        filepath.Join(s.work, "state"),
		meshDir:      filepath.Join(s.work, "mesh"),
		js:           filepath.Join(s.work, "js"),
		poll:         opts.Poll,
		readyTimeout: opts.ReadyTimeout,
		networks: map[string]string{
			Private: "mesh-" + s.id,
			Outside: "mesh-" + s.id + "-outside",
		},
		roles:      map[string]*Handle{},
		enrolments: map[string]Enrolment{},
	}
	if c.poll == 0 {
		c.poll = DefaultPoll
	}
	if c.readyTimeout == 0 {
		c.readyTimeout = defaultReadyTimeout
	}
	if opts.MeshFile == "" {
		return nil, errors.New("raise genesis: no mesh file given")
	}
	c.topology = opts.Topology
	if len(c.topology.Members) == 0 {
		c.topology = topology.Genesis()
	}
	if err := c.topology.Check(); err != nil {
		return nil, fmt.Errorf("raise genesis: %w", err)
	}

	clock := newPhases("genesis cluster run=" + s.id)
	s.narrate("raising genesis cluster run=%s from %s (work %s)", s.id, opts.MeshFile, s.work)
	waves := [][]phase{
		{{"images", c.ensureImages}},
		{{"dirs", func(context.Context) error { return c.makeDirs(opts.MeshFile) }}},
		{{"networks", c.createNetworks}},
	}
	// The store first: genesis keeps the state it mints there.
	for _, m := range c.topology.OfKind(topology.KindPostgres) {
		waves = append(waves, []phase{{m.Name, c.startStore}})
	}
	waves = append(waves, []phase{{"genesis", c.genesis}})
	waves = append(waves, c.memberWaves()...)
	for _, wave := range waves {
		if name, err := raiseWave(ctx, wave); err != nil {
			s.narrate("%s", clock.failed(name))
			return c, fmt.Errorf("raise genesis cluster run=%s: %w", s.id, err)
		}
		clock.done(waveName(wave))
	}
	s.narrate("%s", clock.summary())
	return c, nil
}

func (c *Cluster) ensureImages(ctx context.Context) error {
	set, err := c.s.ensureImages(ctx, c.topology.Has(topology.KindHost), c.topology.Has(topology.KindPredecessor))
	if err != nil {
		return err
	}
	c.images = set
	return nil
}

func (c *Cluster) makeDirs(meshFile string) error {
	for _, dir := range []string{c.state, c.js} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("prepare work dir: %s already exists: the work dir holds a cluster already", dir)
			}
			return fmt.Errorf("prepare work dir: %w", err)
		}
	}
	if err := os.MkdirAll(c.meshDir, 0o755); err != nil {
		return fmt.Errorf("prepare work dir: %w", err)
	}
	return c.StageFile(meshFile, filepath.Base(controllerctr.MeshFile))
}

// createNetworks creates the private and outside networks, both at once:
// each takes the engine half a second or more.
func (c *Cluster) createNetworks(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, which := range []string{Private, Outside} {
		wg.Go(func() {
			labels := c.s.Labels()
			labels[LabelRole] = "network-" + which
			_, err := c.s.docker.NetworkCreate(ctx, c.networks[which], client.NetworkCreateOptions{Driver: "bridge", Labels: labels})
			if err != nil {
				errs[i] = infra("create network "+c.networks[which], err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if c.s.isClosed() {
		// Close may have listed the networks before they existed.
		err := owner.Remove(context.WithoutCancel(ctx), c.s.docker, LabelRun+"="+c.s.id)
		return errors.Join(fmt.Errorf("create networks: %w", ErrClosed), err)
	}
	return nil
}

// controllerBinds are the binds every controller container gets.
func (c *Cluster) controllerBinds() []testcontainers.ContainerCustomizer {
	return []testcontainers.ContainerCustomizer{
		controllerctr.WithStateDir(c.state),
		controllerctr.WithMeshDir(c.meshDir),
	}
}

func (c *Cluster) genesis(ctx context.Context) error {
	args := controllerctr.Args("genesis", filepath.Base(controllerctr.MeshFile))
	if bus := c.topology.MeshBus(); bus != topology.BusNATS {
		args = append(args, "--bus", bus)
	}
	out, exit, err := c.runController(ctx, "genesis", args)
	if err != nil {
		return err
	}
	if exit != 0 {
		return fmt.Errorf("genesis: mesh-controller genesis exited %d:\n%s", exit, tail(out, tailLines))
	}
	return nil
}

// phase is one timed step of raising a cluster.
type phase struct {
	name string
	do   func(context.Context) error
}

// memberWaves raise the topology's members that are not raised on
// demand, in waves: the members of a wave are raised at once, each wave
// once the one before it is up. The buses first, each needing only what
// genesis minted; the predecessor's client once its broker is up; the
// controller once its bus is; then the hosts, which enrol with it, and
// the sources and builders, which take their credentials from it. The
// store is raised before genesis, not here.
func (c *Cluster) memberWaves() [][]phase {
	waveOf := map[string]int{
		topology.KindNATS: 0, topology.KindRabbitMQ: 0,
		topology.KindPredecessor: 1,
		topology.KindController:  2,
		topology.KindHost:        3, topology.KindSource: 3, topology.KindBuilder: 3,
	}
	waves := make([][]phase, 4)
	for _, kind := range topology.Kinds {
		for _, m := range c.topology.Members {
			if m.Kind != kind || m.OnDemand {
				continue
			}
			var p phase
			switch kind {
			case topology.KindNATS:
				p = phase{m.Name, func(ctx context.Context) error { return c.startNATS(ctx, m) }}
			case topology.KindController:
				p = phase{m.Name, c.startController}
			case topology.KindHost:
				p = phase{m.Name, func(ctx context.Context) error { return c.startHost(ctx, m) }}
			case topology.KindSource:
				p = phase{m.Name, func(ctx context.Context) error { return c.startSource(ctx, m) }}
			case topology.KindBuilder:
				p = phase{m.Name, func(ctx context.Context) error { return c.startBuilder(ctx, m) }}
			case topology.KindRabbitMQ:
				p = phase{m.Name, func(ctx context.Context) error { _, err := c.RaiseAMQP(ctx); return err }}
			case topology.KindPredecessor:
				p = phase{m.Name, func(ctx context.Context) error { return c.startPredecessor(ctx, m) }}
			default:
				continue
			}
			w := waveOf[kind]
			waves[w] = append(waves[w], p)
		}
	}
	return slices.DeleteFunc(waves, func(w []phase) bool { return len(w) == 0 })
}

// raiseWave runs the phases of a wave at once and waits for all of them;
// it returns the first phase that failed, by the wave's order, and its
// error (the others' errors joined to it).
func raiseWave(ctx context.Context, wave []phase) (string, error) {
	if len(wave) == 1 {
		return wave[0].name, wave[0].do(ctx)
	}
	errs := make([]error, len(wave))
	var wg sync.WaitGroup
	for i, p := range wave {
		wg.Go(func() { errs[i] = p.do(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return wave[i].name, errors.Join(errs...)
		}
	}
	return "", nil
}

// waveName names a wave in the narration: its phases joined by "+".
func waveName(wave []phase) string {
	names := make([]string, len(wave))
	for i, p := range wave {
		names[i] = p.name
	}
	return strings.Join(names, "+")
}

// startNATS raises the bus's server as member m, on the networks m lists,
// with the configuration the controller composed.
func (c *Cluster) startNATS(ctx context.Context, m topology.Member) error {
	return c.startNATSWith(ctx, m, statedir.Layout{Dir: c.state}.NATS())
}

// startNATSWith raises the bus's server as member m with the
// configuration directory configDir.
func (c *Cluster) startNATSWith(ctx context.Context, m topology.Member, configDir string) error {
	defaults, err := c.imageCmd(ctx, c.images.nats)
	if err != nil {
		return err
	}
	opts := append(c.s.common(RoleNATS),
		testcontainers.WithCmd(defaults...),
		nats.WithPoll(c.poll),
		nats.WithConfigDir(configDir),
		nats.WithStoreDir(c.js),
		network.WithNetworkName([]string{AliasNATS}, c.networks[Private]),
		nats.WithStartupTimeout(c.readyTimeout),
	)
	if slices.Contains(m.Networks, Outside) {
		opts = append(opts, network.WithNetworkName([]string{AliasNATSOutside}, c.networks[Outside]))
	}
	ctr, runErr := nats.Run(ctx, c.images.nats, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := c.s.adopt(ctx, RoleNATS, nats.ReadyLog, c.readyTimeout, got, runErr)
	if h != nil {
		c.setRole(RoleNATS, h)
	}
	if err != nil {
		return err
	}
	c.nats = ctr
	_, err = c.BusAddress(ctx)
	return err
}

func (c *Cluster) startController(ctx context.Context) error {
	opts := append(c.s.common(RoleController), c.controllerBinds()...)
	if m := c.topology.OfKind(topology.KindController); len(m) == 1 && len(m[0].Args) > 0 {
		// Before WithStore, which rewrites the command it is given.
		opts = append(opts, testcontainers.WithCmdArgs(m[0].Args...))
	}
	opts = append(opts,
		// After the default command Run gives it: it rewrites that.
		controllerctr.WithStore(c.storeURL),
		network.WithNetworkName([]string{AliasController}, c.networks[Private]),
		controllerctr.WithStartupTimeout(c.readyTimeout),
	)
	ctr, runErr := controllerctr.Run(ctx, c.images.controller, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := c.s.adopt(ctx, RoleController, controllerctr.ReadyLog, c.readyTimeout, got, runErr)
	if h != nil {
		c.setRole(RoleController, h)
	}
	return err
}

// imageCmd is the image's default command, kept after the flags the
// harness puts in front of it.
func (c *Cluster) imageCmd(ctx context.Context, image string) ([]string, error) {
	res, err := c.s.docker.ImageInspect(ctx, image)
	if err != nil {
		return nil, infra("inspect image "+image, err)
	}
	if res.Config == nil {
		return nil, nil
	}
	return res.Config.Cmd, nil
}

func (c *Cluster) setRole(role string, h *Handle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roles[role] = h
}
