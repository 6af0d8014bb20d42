package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/internal/pgtest"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/controller/pgstore"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// The CONTROL loop's throughput and the ledger's size, with each store
// (issue 18, finding 6; docs/controller-store.md, "The ledger"):
//
//	go test -run X -bench 'Control|Ledger' -benchtime 2000x ./mesh/controller/scale
//
// BenchmarkControl is a leaked token's junk: b.N claims of a token with a
// wrong proof, published at once into CONTROL, and the time until the
// controller (Run, on the in-process server with the composed
// configuration) has answered the last of them. BenchmarkLedger is
// routine reports: b.N reports of one node taken into the store as the
// loop takes them (TakeReport, a clock going 10 ms a report), and the
// ledger's size after.

// stores are the stores measured, by name.
var stores = []string{"file", "postgres"}

// openStore opens a new, empty store of kind under root.
func openStore(b *testing.B, ctx context.Context, kind, root string) (st store.Store, size func() (entries, bytes int64)) {
	b.Helper()
	dir := filepath.Join(root, "state")
	switch kind {
	case "file":
		st := store.FileStore(dir)
		return st, func() (int64, int64) {
			n, err := st.LedgerLen(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return int64(n), fileLedgerBytes(dir)
		}
	case "postgres":
		dsn := pgtest.Start(b).NewDatabase(b)
		s, err := pgstore.Open(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		return s, func() (int64, int64) { return pgLedgerSize(b, dsn) }
	}
	b.Fatalf("no store %q", kind)
	return nil, nil
}

// fileLedgerBytes is what the file store keeps its registry in, the
// ledger among it: every file of the state directory whose name begins
// with "registry".
func fileLedgerBytes(dir string) int64 {
	paths, _ := filepath.Glob(filepath.Join(dir, "registry*"))
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// pgLedgerSize counts the ledger's rows and the bytes they hold.
func pgLedgerSize(b *testing.B, dsn string) (entries, bytes int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.QueryRow(ctx, `SELECT count(*), coalesce(sum(pg_column_size(ledger.*)), 0) FROM ledger`).Scan(&entries, &bytes); err != nil {
		b.Fatal(err)
	}
	return entries, bytes
}

// raise makes a genesis of m on a new store of kind, serves its
// configuration in-process and runs the controller on it until the
// benchmark ends.
func raise(b *testing.B, kind string, m *meshdesc.Mesh) (st store.Store, dir string, o rollout.Options, size func() (int64, int64), stopped <-chan error) {
	b.Helper()
	root := b.TempDir()
	dir = filepath.Join(root, "state")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b.Cleanup(cancel)
	st, size = openStore(b, ctx, kind, root)
	o = genesisOptions(m, root, dir)
	if _, err := rollout.Genesis(ctx, m, st, dir, o); err != nil {
		b.Fatal(err)
	}
	srv := natstest.ServeFile(b, statedir.Layout{Dir: dir}.NATSConfig())
	stopWatch := natstest.ReloadOnChange(b, srv, statedir.Layout{Dir: dir}.NATSConfig(), 100*time.Millisecond, func(err error) { b.Errorf("reload: %v", err) })
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	// A controller that stops ends the run at once, with its reason.
	early := make(chan error, 1)
	go func() {
		err := controller.Run(runCtx, m, st, controller.RunOptions{Dir: dir, Apply: o, StartTimeout: time.Minute})
		if runCtx.Err() == nil {
			early <- fmt.Errorf("the controller stopped: %v", err)
		}
		ran <- err
	}()
	b.Cleanup(func() {
		stopRun()
		if err := <-ran; err != nil {
			b.Errorf("controller: %v", err)
		}
		stopWatch()
		srv.Shutdown()
	})
	waitFor(b, time.Minute, early, "the controller's declarations", func() bool {
		d, err := st.Declared(ctx)
		return err == nil && len(d) == len(m.Nodes)
	})
	return st, dir, o, size, early
}

func BenchmarkControl(b *testing.B) {
	for _, kind := range stores {
		b.Run("store="+kind, func(b *testing.B) {
			m := fleet(b, 2)
			st, dir, o, size, stopped := raise(b, kind, m)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			tok, doc, err := rollout.IssueToken(ctx, m, st, dir, m.Nodes[0].Name, time.Hour, o)
			if err != nil {
				b.Fatal(err)
			}
			cred, err := wire.ParseCredential(doc)
			if err != nil {
				b.Fatal(err)
			}
			var nc *nats.Conn
			waitFor(b, 30*time.Second, stopped, "the token's user connects", func() bool {
				nc, err = link.Dial(ctx, cred)
				return err == nil
			})
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				b.Fatal(err)
			}
			refused := func() int {
				r, err := st.Refusals(ctx)
				if err != nil {
					return -1
				}
				return r.Counts[store.RefusedEnrolment]
			}
			base := refused()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				req := wire.EnrolRequest{Token: tok.ID, Proof: "junk", SealingKey: "junk", Reply: wire.EnrolInbox(tok.ID) + ".junk"}
				if _, err := js.PublishAsync(wire.SubjectEnrol, req.Marshal(), jetstream.WithMsgID(fmt.Sprintf("junk-%d", i))); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(5 * time.Minute):
				b.Fatal("the junk was not all stored within 5 minutes")
			}
			published := time.Since(start)
			waitFor(b, 30*time.Minute, stopped, "every junk claim answered", func() bool { return refused() >= base+b.N })
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "msgs/s")
			b.ReportMetric(float64(b.N)/published.Seconds(), "published/s")
			entries, bytes := size()
			b.ReportMetric(float64(bytes), "ledger-B")
			if entries >= 0 {
				b.ReportMetric(float64(entries), "ledger-entries")
			}
		})
	}
}

func BenchmarkLedger(b *testing.B) {
	for _, kind := range stores {
		b.Run("store="+kind, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			m := fleet(b, 1)
			root := b.TempDir()
			dir := filepath.Join(root, "state")
			st, size := openStore(b, ctx, kind, root)
			now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
			o := rollout.Options{BcryptCost: bcrypt.MinCost, Now: func() time.Time { return now },
				Server: compose.Inputs{ConfigDir: filepath.Join(dir, statedir.NATSDir), StoreDir: filepath.Join(root, "js"), Listen: "127.0.0.1:4222", Monitor: "127.0.0.1:0"}}
			if _, err := rollout.Genesis(ctx, m, st, dir, o); err != nil {
				b.Fatal(err)
			}
			node := m.Nodes[0].Name
			if err := st.Update(ctx, func(tx store.Tx) error {
				return tx.PutNode(ctx, store.Node{Name: node, SealingKey: "k", Enrolled: now, Token: "tok-0"})
			}); err != nil {
				b.Fatal(err)
			}
			subject := wire.NodeReport(node)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				seq := uint64(i + 1)
				id := fmt.Sprintf("r%d", seq)
				rep := wire.Report{Kind: wire.KindReport, Node: node, ID: id, At: now, Applied: 1}
				if err := take(ctx, st, store.LedgerKey(subject, id, seq), seq, subject, rep.Marshal(), o); err != nil {
					b.Fatal(err)
				}
				now = now.Add(10 * time.Millisecond)
				pruneLedger(b, ctx, st, seq, now)
			}
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "msgs/s")
			entries, bytes := size()
			b.ReportMetric(float64(bytes), "ledger-B")
			if entries >= 0 {
				b.ReportMetric(float64(entries), "ledger-entries")
			}
		})
	}
}
