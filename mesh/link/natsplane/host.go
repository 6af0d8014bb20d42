package natsplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// DialHost connects as a node's host (cred is the host's credential) and
// returns its side of the control plane. The dial is tried once: a server
// that has not loaded the host's new user yet refuses it (wrapping
// plane.ErrLoginRefused), and asking again is the caller's, with its own
// backoff and log. Once connected, the connection reconnects by itself,
// without end, until Close: a host outlives any outage of the bus.
func DialHost(ctx context.Context, cred wire.Credential, opts ...link.Option) (plane.Host, error) {
	opts = append([]link.Option{link.WithNATSOptions(nats.MaxReconnects(-1))}, opts...)
	nc, err := link.Dial(ctx, cred, opts...)
	if err != nil {
		return nil, loginError(fmt.Errorf("connect as the host: %w", err))
	}
	return newHost(nc)
}

// loginError wraps plane.ErrLoginRefused around err when the server
// refused the login itself (the user unknown or its password wrong, its
// authorization revoked or expired).
func loginError(err error) error {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAuthExpired) {
		return fmt.Errorf("%w: %w", plane.ErrLoginRefused, err)
	}
	return err
}

// host is plane.Host on one connection as the node's host.
type host struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// newHost is the host's side on nc, a connection it owns from now on.
func newHost(nc *nats.Conn) (*host, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &host{nc: nc, js: js}, nil
}

// Newest reads the node's newest declaration from NODES by a direct get
// (the one JetStream API subject a host is granted, for its own subject
// alone), with the sequence NODES stored it at. The body and signature
// are returned unchecked: checking them is the host's.
func (h *host) Newest(ctx context.Context, node string) (plane.Declared, error) {
	subject := wire.NodeDeclare(node)
	msg, err := h.nc.RequestWithContext(ctx, wire.DirectGetLast(wire.StreamNodes, subject), nil)
	if err != nil {
		return plane.Declared{}, fmt.Errorf("read %s: %w", subject, err)
	}
	if status := msg.Header.Get(wire.HeaderNATSStatus); status == "404" {
		return plane.Declared{}, fmt.Errorf("read %s: %w", subject, plane.ErrNoDeclaration)
	} else if status != "" {
		return plane.Declared{}, fmt.Errorf("read %s: status %s %s", subject, status, msg.Header.Get(wire.HeaderNATSDescription))
	}
	// The server adds the sequence to the stored headers; a publisher may
	// have put one there itself, to pass an old declaration off as a new
	// one: an answer with more than one is not read. This refusal is the
	// bus's to make: only here is it known which header the server wrote.
	seqs := msg.Header.Values(nats.JSSequence)
	if len(seqs) != 1 {
		return plane.Declared{}, fmt.Errorf("%w: read %s: the answer carries %d sequences, not the server's one", wire.ErrDeclaration, subject, len(seqs))
	}
	seq, err := strconv.ParseUint(seqs[0], 10, 64)
	if err != nil {
		return plane.Declared{}, fmt.Errorf("%w: read %s: the answer's sequence %q is not a number", wire.ErrDeclaration, subject, seqs[0])
	}
	return plane.Declared{
		Body:      msg.Data,
		Signature: msg.Header.Get(wire.HeaderSignature),
		Position:  seq,
		Where:     fmt.Sprintf("%s sequence %d", wire.StreamNodes, seq),
	}, nil
}

// Report publishes the report into CONTROL through JetStream, id as its
// Nats-Msg-Id, and returns once CONTROL acknowledged holding it (a
// PubAck from another stream is an error).
func (h *host) Report(ctx context.Context, node, id string, body []byte) error {
	msg := nats.NewMsg(wire.NodeReport(node))
	msg.Data = body
	if _, err := h.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(wire.StreamControl)); err != nil {
		return fmt.Errorf("report %s: %w", id, err)
	}
	return nil
}

// Alive publishes a heartbeat, a core publish nothing keeps.
func (h *host) Alive(_ context.Context, node string, body []byte) error {
	if err := h.nc.Publish(wire.NodeAlive(node), body); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// credentialsFirstWait is how long a credential request waits for its
// answer before it is made again; each wait after is twice the one
// before, up to credentialsLongestWait. An answer can be lost on the way:
// a server reloading its configuration (another node enrolling) clears
// and adds again the hosts' service imports, and the reply of a request
// crossing them then has nowhere to go (the controller's publish is
// refused). Asking is a read, so asking twice is harmless.
const (
	credentialsFirstWait   = time.Second
	credentialsLongestWait = 4 * time.Second
)

// Credentials asks the controller for the node's modules' credentials,
// again while no answer comes, until ctx ends; the server lets the host
// ask on its own node's subject alone.
func (h *host) Credentials(ctx context.Context, node string) ([]byte, error) {
	subject := wire.NodeCredentials(node)
	for wait := credentialsFirstWait; ; wait = min(2*wait, credentialsLongestWait) {
		actx, cancel := context.WithTimeout(ctx, wait)
		msg, err := h.nc.RequestWithContext(actx, subject, nil)
		cancel()
		switch {
		case err == nil:
			return msg.Data, nil
		case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout):
			// The caller's bound, or an answer that will not come by
			// asking again (no responders: the controller is away).
			return nil, fmt.Errorf("request %s: %w", subject, err)
		}
	}
}

// Artifact fetches an artifact from ARTIFACTS by direct gets of its
// chunks (artifact.Fetch), checked against its digest and size.
func (h *host) Artifact(ctx context.Context, digest string, size int64) ([]byte, error) {
	return artifact.Fetch(ctx, h.nc, digest, size)
}

// Close closes the connection.
func (h *host) Close() error {
	h.nc.Close()
	return nil
}
