package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	"github.com/moby/moby/api/types/container"
	dockernet "github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/rabbitmq"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/observe"
	"github.com/meshbus/mesh/stand-ins/predecessor/report"
)

// The predecessor's client (design 25 §5): a client of the broker the
// mesh has, with a user and a virtual host of its own, which the broker's
// operator (here the harness) gave it before the mesh was there; the
// description names them as its compatibility broker's clients.
const (
	// predecessorReady is what it logs once its connection is open.
	predecessorReady = `"msg":"predecessor is connected"`
	// predecessorPort is where it serves its counts.
	predecessorPort = "8080/tcp"
	// amqpPlainPort is the broker's plain AMQP listener, the predecessor's
	// as it always was (the mesh's principals are refused anything but
	// TLS).
	amqpPlainPort = "5672"
)

// predecessorOf is the predecessor's user on the broker.
type predecessorOf struct {
	user, vhost, password string
}

// startPredecessor raises the predecessor's client as member m, logged in
// as its own user on its own virtual host, its counts published on this
// host's loopback for the witness.
func (c *Cluster) startPredecessor(ctx context.Context, m topology.Member) error {
	p := c.predecessor
	if p.password == "" {
		return fmt.Errorf("start %s: the broker was raised without the predecessor's user", m.Name)
	}
	u := rabbitmq.URL(net.JoinHostPort(AliasAMQP, amqpPlainPort), p.user, p.password, p.vhost)
	opts := append(c.s.common(m.Name),
		testcontainers.WithFiles(testcontainers.ContainerFile{Reader: bytes.NewReader([]byte(u + "\n")), ContainerFilePath: images.PredecessorURL, FileMode: 0o644}),
		network.WithNetworkName([]string{m.Name}, c.networks[Private]),
		testcontainers.WithExposedPorts(predecessorPort),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = dockernet.PortMap{dockernet.MustParsePort(predecessorPort): {{HostIP: netip.MustParseAddr("127.0.0.1")}}}
		}),
		testcontainers.WithWaitStrategyAndDeadline(c.readyTimeout, wait.ForLog(predecessorReady).WithStartupTimeout(c.readyTimeout)),
	)
	ctr, runErr := testcontainers.Run(ctx, c.images.predecessor, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := c.s.adopt(ctx, m.Name, predecessorReady, c.readyTimeout, got, runErr)
	if h != nil {
		c.setRole(m.Name, h)
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.predecessorCtr = ctr
	c.mu.Unlock()
	c.s.narrate("%s up as %s on virtual host %s", m.Name, p.user, p.vhost)
	return nil
}

// PredecessorWitness is what reads, from outside, everything the
// predecessor could notice: the broker's management API as the harness's
// administrator, the broker's record of connections, the stand-in's
// counts.
func (c *Cluster) PredecessorWitness(ctx context.Context) (observe.Witness, error) {
	c.mu.Lock()
	ctr, bus, p := c.predecessorCtr, c.amqp, c.predecessor
	c.mu.Unlock()
	if ctr == nil || bus == nil {
		return observe.Witness{}, fmt.Errorf("the predecessor's witness: %w: this cluster raised no predecessor (its members: %v)", ErrUnknownMember, c.topology.Names())
	}
	// Both are published on this host's loopback alone.
	counts, err := loopback(ctx, ctr, predecessorPort)
	if err != nil {
		return observe.Witness{}, infra("the predecessor's published port", err)
	}
	mgmt, err := loopback(ctx, bus.ctr, rabbitmq.ManagementPort)
	if err != nil {
		return observe.Witness{}, infra("the broker's management API's published port", err)
	}
	client, err := rabbithole.NewClient(mgmt, bus.ctr.AdminUsername, bus.ctr.AdminPassword)
	if err != nil {
		return observe.Witness{}, fmt.Errorf("the broker's management API at %s: %w", mgmt, err)
	}
	return observe.Witness{
		Management: client,
		Events: func(ctx context.Context) ([]observe.AMQPEvent, error) {
			events, err := bus.ConnectionEvents(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]observe.AMQPEvent, len(events))
			for i, e := range events {
				out[i] = observe.AMQPEvent(e)
			}
			return out, nil
		},
		Counts:        counts + (&url.URL{Path: report.Path}).String(),
		User:          p.user,
		Vhost:         p.vhost,
		HarnessUsers:  []string{bus.ctr.AdminUsername, amqpObserver},
		HarnessQueues: []observe.Queue{{Vhost: "/", Name: amqpObserverQueue}},
	}, nil
}

// loopback is http://127.0.0.1:<port> where ctr's port is published on
// this host's loopback.
func loopback(ctx context.Context, ctr interface {
	MappedPort(context.Context, string) (dockernet.Port, error)
}, port string) (string, error) {
	p, err := ctr.MappedPort(ctx, port)
	if err != nil {
		return "", err
	}
	return "http://" + net.JoinHostPort("127.0.0.1", p.Port()), nil
}
