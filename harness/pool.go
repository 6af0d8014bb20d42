package harness

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	dockernet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/meshbus/mesh/harness/owner"
)

// recycleTimeout bounds a member's recycling. A broker's stop alone waits
// about 5 s for the management agent's statistics to stop.
const recycleTimeout = time.Minute

// Pool is a run's members recycled from one cluster to the next rather
// than started for each (docs/decisions/0014, ninth and tenth stops): the
// RabbitMQ brokers (a boot takes a broker about 6.5 core-seconds and 9 s,
// a recycled one's start under one) and the stores (a PostgreSQL
// container's start and removal cost the engine about 2.5 core-seconds,
// a recycled one's statements a tenth of that).
//
// A cluster's teardown hands a member back when nothing disturbed it (no
// step stopped, killed, paused, moved or faulted it); it is then taken
// off the cluster's networks and recycled in the background (its
// Recycle: a broker stopped and reset, a store's database dropped and
// made anew, empty), and the next cluster's raise connects it to its own
// network under the member's alias and gives it its own credentials
// (rabbitmq.Reuse, postgres.Reuse). A member disturbed, or one whose
// recycling failed, is removed. Members carry the pool's own labels, not
// a session's: a session's Close hands its members back or removes them,
// the pool's Close removes what it holds, and a run that died leaves them
// to the next run's reaping, as any leftover. Safe for concurrent use.
type Pool struct {
	docker *client.Client
	id     string
	labels map[string]string
	// parking is the pool's network, which a member handed back stays on
	// once off its cluster's: with no network at all Docker leaves the
	// container's /etc/hosts without its own name, and erl_call, which
	// names itself after it, no longer reaches a broker's node.
	parking string

	mu        sync.Mutex
	idle      map[string][]recyclable // by role
	recycling map[string]int          // by role: members being recycled
	changed   chan struct{}           // closed and made anew when idle or recycling change
	closed    bool
	made      map[string]int // by role: members started for the pool
	recycled  map[string]int // by role: raises given a recycled member
	wg        sync.WaitGroup
}

// recyclable is a member the pool can hand on: its container, and how it
// is put back as it was when it started.
type recyclable interface {
	GetContainerID() string
	Recycle(ctx context.Context) error
}

// Pooled are the roles whose members a Pool recycles, in the order a
// run's summary names them.
var Pooled = []string{RoleAMQP, RoleStore}

// NewPool makes an empty pool. Close removes what it holds.
func NewPool(ctx context.Context) (*Pool, error) {
	docker, err := dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	id := newRunID()
	p := &Pool{
		docker: docker, id: id, labels: owner.Labels(id), parking: "mesh-" + id + "-pool",
		idle: map[string][]recyclable{}, recycling: map[string]int{}, made: map[string]int{}, recycled: map[string]int{},
		changed: make(chan struct{}),
	}
	if _, err := docker.NetworkCreate(ctx, p.parking, client.NetworkCreateOptions{Driver: "bridge", Labels: p.labelsAs("network-pool")}); err != nil {
		docker.Close()
		return nil, infra("create network "+p.parking, err)
	}
	return p, nil
}

// labelsAs are the pool's labels, on its members and its network, with
// role.
func (p *Pool) labelsAs(role string) map[string]string {
	labels := maps.Clone(p.labels)
	labels[LabelRole] = role
	return labels
}

// newMember is the container name of the pool's next member of role, and
// its labels.
func (p *Pool) newMember(role string) (name string, labels map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.made[role]++
	return "mesh-" + p.id + "-" + role + "-" + strconv.Itoa(p.made[role]), p.labelsAs(role)
}

// recycleWait bounds how long a raise waits for a member being recycled
// rather than start one: a broker's recycling takes about 6 s, most of it
// the stop waiting for the management agent, a boot 9 s and 6.5
// core-seconds; a store's recycling well under a second.
const recycleWait = 10 * time.Second

// take is an idle member of role, recycled, or nil when none is idle and
// none is being recycled, or none became idle within recycleWait.
func (p *Pool) take(ctx context.Context, role string) recyclable {
	deadline := time.NewTimer(recycleWait)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil
		}
		if n := len(p.idle[role]); n > 0 {
			m := p.idle[role][n-1]
			p.idle[role] = p.idle[role][:n-1]
			p.recycled[role]++
			p.mu.Unlock()
			return m
		}
		if p.recycling[role] == 0 {
			p.mu.Unlock()
			return nil
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// notify wakes the raises waiting in take; p.mu is held.
func (p *Pool) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// idleCount is how many members of role wait, recycled, for a raise.
func (p *Pool) idleCount(role string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle[role])
}

// Counts are how many members of role the pool started and how many
// times a raise took a recycled one (one that its Reuse then refused, and
// removed, counts).
func (p *Pool) Counts(role string) (started, recycled int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.made[role], p.recycled[role]
}

// Summary is the pool's counts in a line: "brokers: 3 started, 18 taken
// recycled; stores: …".
func (p *Pool) Summary() string {
	var parts []string
	for _, role := range Pooled {
		started, recycled := p.Counts(role)
		parts = append(parts, fmt.Sprintf("%s: %d started, %d taken recycled", pooledNoun(role)+"s", started, recycled))
	}
	return strings.Join(parts, "; ")
}

// pooledNoun is what the narration calls a member of role.
func pooledNoun(role string) string {
	switch role {
	case RoleAMQP:
		return "broker"
	case RoleStore:
		return "store"
	}
	return role
}

// giveBack takes the member of role off every network but the pool's and
// recycles it in the background, or removes it when it cannot be handed
// on (park says why).
func (p *Pool) giveBack(ctx context.Context, role string, m recyclable, h *Handle, narrate func(string, ...any)) error {
	removed := func(ctx context.Context, why string) error {
		narrate("%s %s removed, not recycled: %s", pooledNoun(role), h.name, why)
		return p.remove(ctx, m)
	}
	if why := p.park(ctx, m, h); why != "" {
		return removed(ctx, why)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return p.remove(ctx, m)
	}
	p.wg.Add(1)
	p.recycling[role]++
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		rctx, cancel := context.WithTimeout(context.Background(), recycleTimeout)
		defer cancel()
		err := m.Recycle(rctx)
		if err != nil {
			_ = removed(rctx, err.Error())
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.recycling[role]--
		if err == nil && !p.closed { // else Close removes it, once this is done
			p.idle[role] = append(p.idle[role], m)
		}
		p.notify()
	}()
	return nil
}

// park leaves m, which h tracks, on the pool's network alone, or says why
// it cannot be handed on: a step disturbed it, it is not running, or the
// engine refused.
func (p *Pool) park(ctx context.Context, m recyclable, h *Handle) string {
	if h.disturbed.Load() {
		return "a step stopped, killed, paused, moved or faulted it"
	}
	ins, err := p.docker.ContainerInspect(ctx, m.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		return err.Error()
	}
	if st := ins.Container.State; st == nil {
		return "the engine gave no state of it"
	} else if !st.Running || st.Status != "running" {
		return "it is " + string(st.Status)
	}
	var networks map[string]*dockernet.EndpointSettings
	if ns := ins.Container.NetworkSettings; ns != nil {
		networks = ns.Networks
	}
	if _, parked := networks[p.parking]; !parked {
		if _, err := p.docker.NetworkConnect(ctx, p.parking, client.NetworkConnectOptions{Container: m.GetContainerID()}); err != nil {
			return err.Error()
		}
	}
	for net := range networks {
		if net == p.parking {
			continue
		}
		if _, err := p.docker.NetworkDisconnect(ctx, net, client.NetworkDisconnectOptions{Container: m.GetContainerID(), Force: true}); err != nil {
			return err.Error()
		}
	}
	return ""
}

// remove removes the member and its volumes.
func (p *Pool) remove(ctx context.Context, m recyclable) error {
	if _, err := p.docker.ContainerRemove(context.WithoutCancel(ctx), m.GetContainerID(), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		return infra("remove pooled "+m.GetContainerID()[:12], err)
	}
	return nil
}

// Close waits for the members being recycled and removes every member of
// the pool. Idempotent.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.idle = map[string][]recyclable{}
		p.notify()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if err := owner.Remove(ctx, p.docker, LabelRun+"="+p.id); err != nil {
		return fmt.Errorf("remove the run's pooled members: %w", err)
	}
	_ = p.docker.Close()
	return nil
}

// pooledOpts are the name and the options a member of role started for
// the run's pool is created with (the pool's name and labels, not the
// session's); none without a pool.
func (c *Cluster) pooledOpts(role string) (string, []testcontainers.ContainerCustomizer) {
	if c.s.pool == nil {
		return "", nil
	}
	name, labels := c.s.pool.newMember(role)
	return name, []testcontainers.ContainerCustomizer{testcontainers.WithName(name), testcontainers.WithLabels(labels)}
}

// keepPooled records m, a member of role started for the run's pool,
// with the session, whose Close hands it back; one that did not start
// (err), or that the session could not track, is not handed on. Nothing
// without a pool.
func (c *Cluster) keepPooled(ctx context.Context, role, name string, m recyclable, h *Handle, err error) {
	if c.s.pool == nil {
		return
	}
	if h == nil {
		_ = c.s.pool.remove(ctx, m)
		return
	}
	h.name = name
	if err != nil {
		h.disturbed.Store(true)
	}
	c.s.setPooled(role, m, h)
}

// leaseRecycled is a member of role the run's pool recycled, connected to
// the private network as alias and readied for this cluster by reuse,
// tracked by the session (ready and readyTimeout as for a member it
// started), or nil when the pool has none to give. A member reuse
// refuses is removed, and the next one tried.
func (c *Cluster) leaseRecycled(ctx context.Context, role, alias, ready string, readyTimeout time.Duration, reuse func(recyclable) error) (recyclable, error) {
	pool := c.s.pool
	if pool == nil {
		return nil, nil
	}
	for {
		m := pool.take(ctx, role)
		if m == nil {
			return nil, nil
		}
		since := time.Now()
		_, err := c.s.docker.NetworkConnect(ctx, c.networks[Private], client.NetworkConnectOptions{
			Container: m.GetContainerID(), EndpointConfig: &dockernet.EndpointSettings{Aliases: []string{alias}},
		})
		if err == nil {
			err = reuse(m)
		}
		if err != nil {
			c.s.narrate("a recycled %s could not be reused, removed: %v", pooledNoun(role), err)
			_ = pool.remove(ctx, m)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		h, err := c.s.track(ctx, role, m.GetContainerID(), ready, readyTimeout)
		if err != nil {
			_ = pool.remove(ctx, m)
			return nil, err
		}
		// Its logs, as this session saves and reads them, start here.
		h.since = since
		if ins, err := c.s.docker.ContainerInspect(ctx, m.GetContainerID(), client.ContainerInspectOptions{}); err == nil {
			h.name = strings.TrimPrefix(ins.Container.Name, "/")
		}
		c.setRole(role, h)
		c.s.setPooled(role, m, h)
		return m, nil
	}
}
