package scale

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/controller/control"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/amqpplane"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// The CONTROL loop's throughput on each bus (issue 19), the file store
// included: b.N reports of one enrolled node, published at once into
// CONTROL (on NATS the stream, on AMQP the node's report queue), and the
// time until the loop (FollowControl, on the bus's plane.Controller) has
// taken the last of them into the store.
//
//	go test -run X -bench ControlLoop -benchtime 2000x ./mesh/controller/scale
//
// Both run the same loop on the same store; what differs is the bus: the
// publish (JetStream PubAck, publisher confirms), the delivery (a pull
// consumer, a push consumer per queue) and the settlement.
func BenchmarkControlLoop(b *testing.B) {
	for _, bus := range []string{"nats", "amqp"} {
		b.Run("bus="+bus, func(b *testing.B) {
			m := fleet(b, 1)
			node := m.Nodes[0].Name
			root := b.TempDir()
			dir := filepath.Join(root, "state")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			st := store.FileStore(dir)
			o := genesisOptions(m, root, dir)
			if _, err := rollout.Genesis(ctx, m, st, dir, o); err != nil {
				b.Fatal(err)
			}
			if err := st.Update(ctx, func(tx store.Tx) error {
				return tx.PutNode(ctx, store.Node{Name: node, SealingKey: "k", Enrolled: time.Now()})
			}); err != nil {
				b.Fatal(err)
			}
			var ctl plane.Controller
			var publish func(i int) (wait func() error)
			switch bus {
			case "nats":
				ctl, publish = onNATS(b, ctx, m, st, dir)
			case "amqp":
				ctl, publish = onAMQP(b, ctx, m)
			}
			if _, err := ctl.Assert(ctx, m); err != nil {
				b.Fatal(err)
			}
			loop, stop, err := control.FollowControl(ctx, ctl, m, st, dir, o, nil, "")
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			b.ResetTimer()
			start := time.Now()
			if err := windowed(b.N, publish, func() int { return loop.Counts().Reported }); err != nil {
				b.Fatal(err)
			}
			published := time.Since(start)
			waitFor(b, 30*time.Minute, nil, "every report taken", func() bool { return loop.Counts().Reported >= b.N })
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "msgs/s")
			b.ReportMetric(float64(b.N)/published.Seconds(), "published/s")
			// A report refused at the bound and sent again arrives after
			// later ones, so which is kept last is the bus's order, tested
			// elsewhere (control's report tests); here, that one is kept.
			if reps, err := st.Reports(ctx); err != nil || len(reps) != 1 {
				b.Fatalf("expected one report of the node kept, got %+v (%v)", reps, err)
			}
		})
	}
}

func reportID(i int) string { return fmt.Sprintf("r-%08d", i) }

// window is how many reports are sent and not yet taken by the loop at
// once: below the bound of a control subject (256), which refuses what is
// past it on both buses, so that what is measured is the loop's pace with
// a steady backlog, not the bound's refusals.
const window = 128

// windowed publishes n reports, at most window of them sent and not yet
// taken (taken counts those the loop took), each refused one sent again
// (a host's outbox does the same).
func windowed(n int, publish func(int) func() error, taken func() int) error {
	type sent struct {
		i    int
		wait func() error
	}
	var inflight []sent
	settle := func() error {
		s := inflight[0]
		inflight = inflight[1:]
		for attempt := 1; s.wait() != nil; attempt++ {
			if attempt == 100 {
				return fmt.Errorf("report %d refused 100 times", s.i)
			}
			time.Sleep(10 * time.Millisecond)
			s.wait = publish(s.i)
		}
		return nil
	}
	for i := range n {
		for len(inflight) == window || i-taken() >= window {
			if len(inflight) > 0 {
				if err := settle(); err != nil {
					return err
				}
				continue
			}
			time.Sleep(time.Millisecond)
		}
		inflight = append(inflight, sent{i, publish(i)})
	}
	for len(inflight) > 0 {
		if err := settle(); err != nil {
			return err
		}
	}
	return nil
}

// report is the i-th report of node, each made a microsecond after the
// one before (AMQP orders a node's reports by their time).
func report(node string, i int, base time.Time) []byte {
	return wire.Report{Kind: wire.KindReport, Node: node, ID: reportID(i), At: base.Add(time.Duration(i) * time.Microsecond), Applied: 1}.Marshal()
}

// onNATS serves the genesis's configuration in-process and connects the
// controller; reports are published as the controller's control user,
// asynchronously, each with its id.
func onNATS(b *testing.B, ctx context.Context, m *meshdesc.Mesh, st store.Store, dir string) (plane.Controller, func(int) func() error) {
	srv := natstest.ServeFile(b, statedir.Layout{Dir: dir}.NATSConfig())
	b.Cleanup(srv.Shutdown)
	creds := map[string]wire.Credential{}
	for _, user := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		data, err := st.Credential(ctx, user)
		if err != nil {
			b.Fatal(err)
		}
		if creds[user], err = wire.ParseCredential(data); err != nil {
			b.Fatal(err)
		}
	}
	ctl, err := natsplane.DialController(ctx, creds[wire.ControllerUser], creds[wire.ControllerMeshUser], natsplane.ControllerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ctl.Close() })
	js, err := jetstream.New(ctl.Control)
	if err != nil {
		b.Fatal(err)
	}
	node, base := m.Nodes[0].Name, time.Now()
	return ctl, func(i int) func() error {
		msg := nats.NewMsg(wire.NodeReport(node))
		msg.Data = report(node, i, base)
		f, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(reportID(i)))
		return func() error {
			if err != nil {
				return err
			}
			select {
			case <-f.Ok():
				return nil
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// onAMQP raises RabbitMQ with the mesh's definitions and connects the
// controller; reports are published as the node's host into its report
// queue with confirms, each with its id.
func onAMQP(b *testing.B, ctx context.Context, m *meshdesc.Mesh) (plane.Controller, func(int) func() error) {
	br := amqptest.Start(b, m)
	ctl, err := amqpplane.DialController(ctx, br.Creds[wire.ControllerUser], br.Creds[wire.ControllerMeshUser], amqpplane.ControllerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ctl.Close() })
	node, base := m.Nodes[0].Name, time.Now()
	conn := br.Dial(b, wire.HostUser(node))
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	return ctl, func(i int) func() error {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, wire.ExchangeControl, wire.NodeReport(node), true, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: reportID(i), Body: report(node, i, base),
		})
		return func() error {
			if err != nil {
				return err
			}
			ok, err := dc.WaitContext(ctx)
			if err == nil && !ok {
				err = fmt.Errorf("report %d refused (a negative confirm)", i)
			}
			return err
		}
	}
}
