package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// resetWithin bounds a reset's wait for its cluster to read as raised: a
// driver's pull requests leave the consumer's list once the server sees
// their connection gone.
const resetWithin = 5 * time.Second

// touches is what a scenario changed in its cluster that a reset puts
// back, unlike a taint: the streams of the mesh's account it stored
// messages in (emptied) and the consumers it drove (their count of
// deliveries moves on; nothing else of them may). Only a scenario tagged
// beds.TagSharesCluster (itself, its outline or its feature) has its
// cluster reset; for any other a touch is a taint.
type touches struct {
	purge, driven []string
}

// stored notes that the scenario stored messages in streams, each with an
// id of its own or none: a stream's duplicate window outlives a purge, so
// a step storing an id another scenario could store again taints instead.
func (t *touches) stored(streams ...string) {
	for _, s := range streams {
		if !slices.Contains(t.purge, s) {
			t.purge = append(t.purge, s)
		}
	}
}

// drove notes that the scenario drove consumer.
func (t *touches) drove(consumer string) {
	if !slices.Contains(t.driven, consumer) {
		t.driven = append(t.driven, consumer)
	}
}

func (t touches) any() bool { return len(t.purge) > 0 || len(t.driven) > 0 }

// asRaised is a cluster's JetStream as it was raised, read in the mesh's
// account and the control plane's, with the credentials it was read with:
// what a reset is checked against.
type asRaised struct {
	accounts map[string]accountAsRaised // by the user that reads it
}

type accountAsRaised struct {
	cred    wire.Credential
	streams map[string]observe.Stream
}

// readers are the users a reset reads the cluster as: the controller, in
// the mesh's account and in the control plane's.
var readers = []string{wire.ControllerMeshUser, wire.ControllerUser}

// noteAsRaised reads the cluster the scenario just leased, once, if the
// scenario shares clusters: a clean cluster reads as it was raised.
func (s *scenario) noteAsRaised(ctx context.Context) error {
	if !s.shares(ctx) || s.r.asRaised != nil {
		return nil
	}
	return s.readAsRaised(ctx)
}

// shares says whether the scenario is tagged beds.TagSharesCluster; a
// test may say so itself (sharing).
func (s *scenario) shares(ctx context.Context) bool {
	_, sc, ok := beds.Current(ctx)
	return s.sharing || ok && sc.HasTag(beds.TagSharesCluster)
}

// readAsRaised reads the cluster the scenario leased, taken to be as
// raised.
func (s *scenario) readAsRaised(ctx context.Context) error {
	noted := &asRaised{accounts: map[string]accountAsRaised{}}
	for _, user := range readers {
		cred, err := s.r.cluster.Credential(ctx, user)
		if err != nil {
			return err
		}
		streams, err := s.readStreamsAs(ctx, cred)
		if err != nil {
			return fmt.Errorf("read the cluster as raised, as %s: %w", user, err)
		}
		noted.accounts[user] = accountAsRaised{cred: cred, streams: streams}
	}
	s.r.asRaised = noted
	return nil
}

// readStreamsAs reads every stream and durable consumer of the account
// cred is in (an ephemeral one, the controller's watch of NODES, is
// recreated under another name at will: readStreams).
func (s *scenario) readStreamsAs(ctx context.Context, cred wire.Credential) (map[string]observe.Stream, error) {
	c, err := s.dial(ctx, cred)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return nil, err
	}
	streams, err := observe.Streams(ctx, js)
	return durableOnly(streams), err
}

// errNotShared: the scenario does not declare that it shares clusters, so
// what it touched taints.
var errNotShared = errors.New("the scenario is not tagged " + beds.TagSharesCluster)

// reset puts back what the scenario touched and checks, within
// resetWithin, that the cluster reads as it was raised in every account:
// the same streams and consumers, configured the same, the streams not
// purged holding what they held, nothing pending, unacknowledged,
// redelivered or waited for, no consumer the scenario did not drive
// having delivered. An error leaves the cluster to be thrown away.
func (s *scenario) reset(ctx context.Context) error {
	noted := s.r.asRaised
	if noted == nil || !s.shares(ctx) {
		return errNotShared
	}
	start := time.Now()
	mesh := noted.accounts[wire.ControllerMeshUser]
	for _, name := range s.touched.purge {
		if wire.StreamAccount(name) != wire.AccountMesh {
			return fmt.Errorf("stream %s is not in the mesh's account: a reset empties only those", name)
		}
	}
	if err := s.purge(ctx, mesh.cred, s.touched.purge); err != nil {
		return err
	}
	allowed := observe.Reset{Purged: s.touched.purge, Driven: s.touched.driven}
	var problems []string
	err := eventually(ctx, resetWithin, func(ctx context.Context) error {
		problems = nil
		for _, user := range readers {
			acc := noted.accounts[user]
			now, err := s.readStreamsAs(ctx, acc.cred)
			if err != nil {
				return err
			}
			for _, p := range observe.AsRaised(acc.streams, now, allowed) {
				problems = append(problems, "as "+user+": "+p)
			}
		}
		if len(problems) > 0 {
			return errors.New(strings.Join(problems, "; "))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the cluster does not read as raised after its reset: %w", err)
	}
	beds.ClusterReset(ctx)
	beds.Logf(ctx, "cluster reset for the next scenario in %s: purged %s; drove %s",
		time.Since(start).Round(time.Millisecond), orNone(s.touched.purge), orNone(s.touched.driven))
	return nil
}

// purge empties streams of the account cred is in.
func (s *scenario) purge(ctx context.Context, cred wire.Credential, streams []string) error {
	if len(streams) == 0 {
		return nil
	}
	c, err := s.dial(ctx, cred)
	if err != nil {
		return err
	}
	defer c.Close()
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	for _, name := range streams {
		st, err := js.Stream(ctx, name)
		if err == nil {
			err = st.Purge(ctx)
		}
		if err != nil {
			return fmt.Errorf("purge %s: %w", name, err)
		}
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}
