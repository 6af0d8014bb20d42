package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"github.com/meshbus/mesh/stand-ins/predecessor/report"
)

// witnessCallTimeout bounds a call to the management API made without a
// deadline: a broker that does not answer fails the snapshot, it does not
// hang it.
const witnessCallTimeout = 10 * time.Second

// Witness reads PredecessorSnapshots from outside the predecessor and the
// mesh: the broker's management API, the broker's record of connections,
// and the stand-in's counts.
type Witness struct {
	// Management is the broker's management API as a user that sees every
	// connection and the predecessor's virtual host (the harness's
	// administrator, never a principal of the mesh).
	Management *rabbithole.Client
	// Events reads the broker's events about connections since it was
	// raised (AMQPConnectionsEver folds them).
	Events func(context.Context) ([]AMQPEvent, error)
	// Counts is the URL of the stand-in's counts (report.Path).
	Counts string
	// User and Vhost are the predecessor's.
	User, Vhost string
	// HarnessUsers and HarnessQueues are what the harness itself keeps on
	// the broker (its administrator; the observer of the broker's
	// connection events and that observer's queue): neither the mesh's nor
	// the predecessor's.
	HarnessUsers  []string
	HarnessQueues []Queue
}

// Queue is a queue of a virtual host.
type Queue struct{ Vhost, Name string }

// listingLagWithin bounds how long the management API's list of
// connections may lag the broker: it lists a connection once the broker
// has emitted its first statistics for it (collect_statistics_interval,
// 5 s by default), later on a loaded machine.
const listingLagWithin = 20 * time.Second

// Snapshot reads everything the predecessor could notice, now: once the
// management API lists the connection the stand-in has open (it lists one
// only after its first statistics, seconds after the broker accepted it),
// or after listingLagWithin, when the snapshot shows what it lists then
// and a comparison names the difference. Without the wait, a note taken
// within seconds of the stand-in's connecting lacked its connection, and
// the next one saw it "appear".
func (w Witness) Snapshot(ctx context.Context) (PredecessorSnapshot, error) {
	deadline := time.Now().Add(listingLagWithin)
	for {
		s, listed, err := w.snapshot(ctx)
		if err != nil || listed || time.Now().After(deadline) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// snapshot reads everything the predecessor could notice, and says
// whether the management API lists the connection the stand-in has open
// (true when it has none).
func (w Witness) snapshot(ctx context.Context) (PredecessorSnapshot, bool, error) {
	s := PredecessorSnapshot{Taken: time.Now().UTC()}
	var err error
	if s.Counts, err = w.counts(ctx); err != nil {
		return s, false, err
	}
	open := 0 // the local port of the stand-in's open connection
	if n := len(s.Counts.Connections); n > len(s.Counts.Disconnects) {
		open = s.Counts.Connections[n-1].LocalPort
	}
	listed := open == 0
	// rabbit-hole takes no context: each call is bounded by the
	// context's deadline, or by witnessCallTimeout where it has none.
	mgmt := *w.Management
	timeout := witnessCallTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	mgmt.SetTimeout(timeout)
	u, err := mgmt.GetUser(w.User)
	if err != nil {
		return s, false, fmt.Errorf("witness: the predecessor's user %s: %w", w.User, err)
	}
	s.User = fmt.Sprintf("%s tags %v hash %s %s", u.Name, []string(u.Tags), u.PasswordHash, u.HashingAlgorithm)

	conns, err := mgmt.ListConnections()
	if err != nil {
		return s, false, fmt.Errorf("witness: the broker's connections: %w", err)
	}
	for _, c := range conns {
		if c.User == w.User {
			listed = listed || int(c.PeerPort) == open
			s.Connections = append(s.Connections, fmt.Sprintf("name=%q vhost=%s peer_port=%v connected_at=%d",
				c.ClientProperties["connection_name"], c.Vhost, c.PeerPort, c.ConnectedAt))
		}
	}
	slices.Sort(s.Connections)

	events, err := w.Events(ctx)
	if err != nil {
		return s, false, fmt.Errorf("witness: the broker's record of connections: %w", err)
	}
	rec, err := AMQPConnectionsEver(events)
	if err != nil {
		return s, false, fmt.Errorf("witness: %w", err)
	}
	for _, c := range rec.Connections {
		if c.User != w.User {
			continue
		}
		if !strings.HasPrefix(c.Reason, "login refused") {
			s.Opened++
		}
		if c.Reason != "" {
			s.Closed++
		}
	}

	if s.Definitions, err = w.definitions(&mgmt); err != nil {
		return s, false, err
	}
	return s, listed, nil
}

// definitions are the predecessor's virtual host's exchanges, queues,
// bindings and grants, and its user's grants anywhere, as sorted lines.
func (w Witness) definitions(mgmt *rabbithole.Client) ([]string, error) {
	var out []string
	xs, err := mgmt.ListExchangesIn(w.Vhost)
	if err != nil {
		return nil, fmt.Errorf("witness: exchanges of %s: %w", w.Vhost, err)
	}
	for _, x := range xs {
		out = append(out, fmt.Sprintf("exchange %q %s durable=%t auto_delete=%v internal=%t args=%s",
			x.Name, x.Type, x.Durable, x.AutoDelete, x.Internal, canonical(x.Arguments)))
	}
	qs, err := mgmt.ListQueuesIn(w.Vhost)
	if err != nil {
		return nil, fmt.Errorf("witness: queues of %s: %w", w.Vhost, err)
	}
	for _, q := range qs {
		out = append(out, fmt.Sprintf("queue %q %s durable=%t auto_delete=%v exclusive=%t args=%s",
			q.Name, q.Type, q.Durable, q.AutoDelete, q.Exclusive, canonical(q.Arguments)))
	}
	bs, err := mgmt.ListBindingsIn(w.Vhost)
	if err != nil {
		return nil, fmt.Errorf("witness: bindings of %s: %w", w.Vhost, err)
	}
	for _, b := range bs {
		out = append(out, fmt.Sprintf("binding %q -> %s %q key %q args=%s",
			b.Source, b.DestinationType, b.Destination, b.RoutingKey, canonical(b.Arguments)))
	}
	ps, err := mgmt.ListPermissions()
	if err != nil {
		return nil, fmt.Errorf("witness: permissions: %w", err)
	}
	for _, p := range ps {
		if p.Vhost == w.Vhost || p.User == w.User {
			out = append(out, fmt.Sprintf("permission %s in %s: configure %q write %q read %q", p.User, p.Vhost, p.Configure, p.Write, p.Read))
		}
	}
	ts, err := mgmt.ListTopicPermissions()
	if err != nil {
		return nil, fmt.Errorf("witness: topic permissions: %w", err)
	}
	for _, p := range ts {
		if p.Vhost == w.Vhost || p.User == w.User {
			out = append(out, fmt.Sprintf("topic permission %s in %s on %q: write %q read %q", p.User, p.Vhost, p.Exchange, p.Write, p.Read))
		}
	}
	slices.Sort(out)
	return out, nil
}

// counts reads the stand-in's own counts.
func (w Witness) counts(ctx context.Context) (report.Counts, error) {
	var c report.Counts
	ctx, cancel := context.WithTimeout(ctx, witnessCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.Counts, nil)
	if err != nil {
		return c, fmt.Errorf("witness: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("witness: the predecessor's counts: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return c, fmt.Errorf("witness: the predecessor's counts: %s", res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
		return c, fmt.Errorf("witness: read the predecessor's counts: %w", err)
	}
	return c, nil
}

// canonical is a map of arguments as one line, keys sorted.
func canonical(m map[string]any) string {
	var b strings.Builder
	b.WriteString("{")
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%s=%v", k, m[k])
	}
	b.WriteString("}")
	return b.String()
}
