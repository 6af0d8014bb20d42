package harness

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/meshbus/mesh/harness/owner"
	"github.com/meshbus/mesh/harness/rabbitmq"
)

// recycleTimeout bounds a broker's stop and reset. The stop alone waits
// about 5 s for the management agent's statistics to stop.
const recycleTimeout = time.Minute

// Brokers are a run's RabbitMQ brokers, recycled from one cluster to the
// next rather than booted for each (docs/decisions/0014, ninth stop): a
// boot takes the broker about 6.5 core-seconds and 9 s, a recycled one's
// start under one. A cluster's teardown hands its broker back when
// nothing disturbed it (no step stopped, killed, paused, moved or faulted
// it); the broker is then stopped and reset in the background
// (rabbitmq.Recycle: every user, virtual host, permission, queue and
// message gone) and taken off the cluster's networks, and the next
// cluster's raise connects it to its own network as the broker, gives it
// its certificate, key and definitions, and starts it
// (rabbitmq.Reuse). A broker disturbed, or one whose recycling failed,
// is removed. The brokers carry the pool's own labels, not a session's:
// a session's Close hands its broker back or removes it, the pool's Close
// removes what it holds, and a run that died leaves them to the next
// run's reaping, as any leftover. Safe for concurrent use.
type Brokers struct {
	docker *client.Client
	id     string
	labels map[string]string
	// parking is the pool's network, which a broker handed back stays on
	// once off its cluster's: with no network at all Docker leaves the
	// container's /etc/hosts without its own name, and erl_call, which
	// names itself after it, no longer reaches the node.
	parking string

	mu        sync.Mutex
	idle      []*rabbitmq.RabbitMQContainer
	recycling int           // brokers being stopped and reset
	changed   chan struct{} // closed and made anew when idle or recycling change
	closed    bool
	made      int
	recycled  int
	wg        sync.WaitGroup
}

// NewBrokers makes an empty pool. Close removes what it holds.
func NewBrokers(ctx context.Context) (*Brokers, error) {
	docker, err := dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	id := newRunID()
	b := &Brokers{docker: docker, id: id, labels: owner.Labels(id), parking: "mesh-" + id + "-brokers", changed: make(chan struct{})}
	labels := b.labelsAs("network-brokers")
	if _, err := docker.NetworkCreate(ctx, b.parking, client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
		docker.Close()
		return nil, infra("create network "+b.parking, err)
	}
	return b, nil
}

// labelsAs are the pool's labels, on its brokers and its network, with
// role.
func (b *Brokers) labelsAs(role string) map[string]string {
	labels := maps.Clone(b.labels)
	labels[LabelRole] = role
	return labels
}

// newBroker is the container name of the pool's next broker, and its
// labels.
func (b *Brokers) newBroker() (name string, labels map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.made++
	return "mesh-" + b.id + "-amqp-" + strconv.Itoa(b.made), b.labelsAs(RoleAMQP)
}

// recycleWait bounds how long a raise waits for a broker being recycled
// rather than boot one: a recycling takes about 6 s, most of it the stop
// waiting for the management agent, a boot 9 s and 6.5 core-seconds.
const recycleWait = 10 * time.Second

// take is an idle broker, recycled, or nil when none is idle and none is
// being recycled, or none became idle within recycleWait.
func (b *Brokers) take(ctx context.Context) *rabbitmq.RabbitMQContainer {
	deadline := time.NewTimer(recycleWait)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil
		}
		if n := len(b.idle); n > 0 {
			ctr := b.idle[n-1]
			b.idle = b.idle[:n-1]
			b.recycled++
			b.mu.Unlock()
			return ctr
		}
		if b.recycling == 0 {
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// notify wakes the raises waiting in take; b.mu is held.
func (b *Brokers) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// idleCount is how many brokers wait, recycled, for a raise.
func (b *Brokers) idleCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.idle)
}

// Counts are how many brokers the pool booted and how many times a raise
// took a recycled one (one that Reuse then refused, and removed, counts).
func (b *Brokers) Counts() (booted, recycled int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.made, b.recycled
}

// giveBack takes the broker off every network it is on and recycles it in
// the background, or removes it when h says it was disturbed or it is not
// running.
func (b *Brokers) giveBack(ctx context.Context, ctr *rabbitmq.RabbitMQContainer, h *Handle, narrate func(string, ...any)) error {
	st, err := h.Inspect(ctx)
	switch {
	case err != nil:
		narrate("broker %s removed, not recycled: %v", h.name, err)
		return b.remove(ctx, ctr)
	case h.disturbed.Load():
		narrate("broker %s removed, not recycled: a step stopped, killed, paused, moved or faulted it", h.name)
		return b.remove(ctx, ctr)
	case !st.Running || st.Status != "running":
		narrate("broker %s removed, not recycled: it is %s", h.name, st.Status)
		return b.remove(ctx, ctr)
	}
	ins, err := b.docker.ContainerInspect(ctx, ctr.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		narrate("broker %s removed, not recycled: %v", h.name, err)
		return b.remove(ctx, ctr)
	}
	if _, parked := ins.Container.NetworkSettings.Networks[b.parking]; !parked {
		if _, err := b.docker.NetworkConnect(ctx, b.parking, client.NetworkConnectOptions{Container: ctr.GetContainerID()}); err != nil {
			narrate("broker %s removed, not recycled: %v", h.name, err)
			return b.remove(ctx, ctr)
		}
	}
	if ins.Container.NetworkSettings != nil {
		for net := range ins.Container.NetworkSettings.Networks {
			if net == b.parking {
				continue
			}
			if _, err := b.docker.NetworkDisconnect(ctx, net, client.NetworkDisconnectOptions{Container: ctr.GetContainerID(), Force: true}); err != nil {
				narrate("broker %s removed, not recycled: %v", h.name, err)
				return b.remove(ctx, ctr)
			}
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return b.remove(ctx, ctr)
	}
	b.wg.Add(1)
	b.recycling++
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		rctx, cancel := context.WithTimeout(context.Background(), recycleTimeout)
		defer cancel()
		err := ctr.Recycle(rctx)
		if err != nil {
			narrate("broker %s removed, not recycled: %v", h.name, err)
			_ = b.remove(rctx, ctr)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.recycling--
		if err == nil && !b.closed { // else Close removes it, once this is done
			b.idle = append(b.idle, ctr)
		}
		b.notify()
	}()
	return nil
}

// remove removes the broker and its volumes.
func (b *Brokers) remove(ctx context.Context, ctr *rabbitmq.RabbitMQContainer) error {
	if _, err := b.docker.ContainerRemove(context.WithoutCancel(ctx), ctr.GetContainerID(), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		return infra("remove broker "+ctr.GetContainerID()[:12], err)
	}
	return nil
}

// Close waits for the brokers being recycled and removes every broker of
// the pool. Idempotent.
func (b *Brokers) Close(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.idle = nil
		b.notify()
	}
	b.mu.Unlock()
	b.wg.Wait()
	if err := owner.Remove(ctx, b.docker, LabelRun+"="+b.id); err != nil {
		return fmt.Errorf("remove the run's brokers: %w", err)
	}
	_ = b.docker.Close()
	return nil
}
