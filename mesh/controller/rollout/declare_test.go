package rollout_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/wire"
)

// guarded is a bed with its streams asserted and the declarations guarded.
func guarded(t *testing.T) (*controllertest.Bed, controllertest.Routed, ed25519.PublicKey) {
	t.Helper()
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	js := b.JS()
	if _, err := b.Assert(js); err != nil {
		t.Fatal(err)
	}
	key, err := b.St.DeclarationKey(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, stop, err := rollout.GuardDeclarations(ctx, b.Bus(), key, rollout.Declarations(b.M), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	hostKey, err := wire.DecodeDeclarationKey(b.Credential(wire.HostUser("node-b")).DeclarationKey)
	if err != nil {
		t.Fatal(err)
	}
	return b, js, hostKey
}

// declaration reads what NODES holds for node, checked as its host would.
func declaration(t *testing.T, js controllertest.Routed, pub ed25519.PublicKey, node string) (wire.Declaration, error) {
	t.Helper()
	st, err := js.Stream(controllertest.Ctx(t), wire.StreamNodes)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(controllertest.Ctx(t), wire.NodeDeclare(node))
	if err != nil {
		return wire.Declaration{}, err
	}
	return wire.VerifyDeclaration(pub, m.Subject, m.Data, m.Header.Get(wire.HeaderSignature))
}

func TestEveryNodeGetsItsSignedDeclaration(t *testing.T) {
	b, js, pub := guarded(t)
	for _, n := range b.M.Nodes {
		d, err := declaration(t, js, pub, n.Name)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		if !slices.Equal(d.Modules, n.Modules) {
			t.Fatalf("%s: expected modules %v, got %v", n.Name, n.Modules, d.Modules)
		}
	}
}

// TestAHostsPubAckCannotReachAnotherNodesDeclaration: a host reaches
// CONTROL through the hosts' service import, whose reply is the server's
// (docs/decisions/0007): its report's PubAck, aimed at another node's
// declaration, comes back to it, and NODES holds what it held. (Before,
// the PubAck landed there, the reader refused it and the guard put the
// declaration back.)
func TestAHostsPubAckCannotReachAnotherNodesDeclaration(t *testing.T) {
	b, js, _ := guarded(t)
	st, err := js.Stream(controllertest.Ctx(t), wire.StreamNodes)
	if err != nil {
		t.Fatal(err)
	}
	before, err := st.Info(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	host, err := b.Dial(wire.HostUser("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if err := host.PublishRequest(wire.NodeReport("node-a"), wire.NodeDeclare("node-b"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	// CONTROL acknowledges in order: once an ordinary report has its
	// PubAck, the aimed one has had its own.
	hjs, err := jetstream.New(host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hjs.Publish(controllertest.Ctx(t), wire.NodeReport("node-a"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	after, err := st.Info(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if after.State.LastSeq != before.State.LastSeq {
		t.Fatalf("NODES's last sequence was %d, now %d: the host's PubAck landed", before.State.LastSeq, after.State.LastSeq)
	}
}

func TestASubjectOfNodesThatIsNoNodesIsPurged(t *testing.T) {
	b, js, _ := guarded(t)
	host, err := b.Dial(wire.HostUser("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	stray := wire.NodeDeclare("nobody") // a node the mesh does not have
	if err := host.PublishRequest(wire.NodeReport("node-a"), stray, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(controllertest.Ctx(t), wire.StreamNodes)
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, 5*time.Second, stray+" purged", func() bool {
		info, err := st.Info(controllertest.Ctx(t), jetstream.WithSubjectFilter(wire.SubjectNodesAll))
		if err != nil {
			return false
		}
		_, there := info.State.Subjects[stray]
		return !there && info.State.Msgs == uint64(len(b.M.Nodes))
	})
}

// TestAStaleOrForeignDeclarationIsReplacedOnStart: what the guard finds
// on start is checked too, not only what arrives after.
func TestAStaleOrForeignDeclarationIsReplacedOnStart(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	js := b.JS()
	if _, err := b.Assert(js); err != nil {
		t.Fatal(err)
	}
	_, foreign, _ := ed25519.GenerateKey(nil)
	body, sig, _ := wire.SignDeclaration(foreign, wire.Declaration{Node: "node-b", Modules: []string{"sensor"}})
	msg := &nats.Msg{Subject: wire.NodeDeclare("node-b"), Header: nats.Header{wire.HeaderSignature: []string{sig}}, Data: body}
	if _, err := js.Of(wire.StreamNodes).PublishMsg(controllertest.Ctx(t), msg); err != nil {
		t.Fatal(err)
	}
	key, err := b.St.DeclarationKey(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	_, stop, err := rollout.GuardDeclarations(controllertest.Ctx(t), b.Bus(), key, rollout.Declarations(b.M), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	pub := key.Public().(ed25519.PublicKey)
	controllertest.Eventually(t, 5*time.Second, "node-b's own declaration", func() bool {
		d, err := declaration(t, js, pub, "node-b")
		return err == nil && slices.Equal(d.Modules, []string{"logger"})
	})
}

// TestThePolicyFitsTheAccounts: the streams of each account, at their
// limits, fit the account's JetStream limit, or the server would refuse
// the last of them to be created (or a full one to be written).
func TestThePolicyFitsTheAccounts(t *testing.T) {
	p, l := natsplane.DefaultPolicy(), compose.DefaultLimits()
	sum := map[string]int64{}
	count := map[string]int{}
	for _, s := range wire.Streams {
		if p.Bytes[s] <= 0 || p.MsgSize[s] <= 0 {
			t.Errorf("stream %s is unbounded: %d bytes, %d per message", s, p.Bytes[s], p.MsgSize[s])
		}
		sum[wire.StreamAccount(s)] += p.Bytes[s]
		count[wire.StreamAccount(s)]++
	}
	for acct, lim := range map[string]struct {
		file    int64
		streams int
	}{wire.AccountControl: {l.ControlFile, l.ControlStreams}, wire.AccountMesh: {l.MeshFile, l.MeshStreams}} {
		if sum[acct] > lim.file || count[acct] > lim.streams {
			t.Errorf("account %s: streams need %d bytes in %d streams, the account allows %d in %d", acct, sum[acct], count[acct], lim.file, lim.streams)
		}
	}
}

// TestTheCatalogueTravelsInItsNodesDeclaration: the node running the
// catalogue's module is declared the catalogue as the module's
// configuration; a change of a manifest's tools changes that node's
// declaration, and the same catalogue spelled otherwise (as jsonb keeps
// it) does not.
func TestTheCatalogueTravelsInItsNodesDeclaration(t *testing.T) {
	m := controllertest.SampleMesh(t)
	byNode := map[string]wire.Declaration{}
	for _, d := range rollout.Declarations(m) {
		byNode[d.Node] = d
	}
	cat, err := wire.ParseCatalogue(byNode["node-a"].Config[wire.CatalogSeat])
	if err != nil {
		t.Fatalf("node-a's declaration carries no catalogue: %v", err)
	}
	if len(cat.Tools) != 2 || cat.Tools[1].Name() != "sensor.calibrate" || cat.Tools[1].Description == "" {
		t.Fatalf("the catalogue declared: %+v", cat.Tools)
	}
	if byNode["node-b"].Config != nil {
		t.Errorf("node-b runs no catalogue, and was declared %s", byNode["node-b"].Config)
	}
	respelled := byNode["node-a"]
	var v any
	_ = json.Unmarshal(respelled.Config[wire.CatalogSeat], &v)
	indented, _ := json.MarshalIndent(v, "", "   ")
	respelled.Config = map[string]json.RawMessage{wire.CatalogSeat: indented}
	if !rollout.SameDeclaration(byNode["node-a"], respelled) {
		t.Error("the same catalogue spelled otherwise is taken for a change")
	}
	changed := *m
	changed.Modules = slices.Clone(m.Modules)
	for i, mod := range changed.Modules {
		if mod.Name == "sensor" {
			changed.Modules[i].Tools = []string{"calibrate", "reset"}
		}
	}
	for _, d := range rollout.Declarations(&changed) {
		if d.Node == "node-a" && rollout.SameDeclaration(byNode["node-a"], d) {
			t.Error("a tool added to a manifest left the catalogue's node's declaration the same")
		}
	}
}
