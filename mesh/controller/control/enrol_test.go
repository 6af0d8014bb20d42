package control

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// living is a bed whose controller runs with its CONTROL loop, and whose
// in-process server reloads nats.conf when it changes, as the nats
// image's entrypoint does.
type living struct {
	*controllertest.Bed
	loop  *ControlLoop
	conns *natsplane.Controller
	// programs are the programs directories of the hosts started, by node.
	programs map[string]string
}

func newLiving(t *testing.T) *living { return newLivingOf(t, controllertest.SampleMesh(t), true) }

// newLivingGuarded is newLiving, with the declarations' guard or without
// it (a test that must see what lands on NODES before it is put back).
func newLivingGuarded(t *testing.T, guarded bool) *living {
	return newLivingOf(t, controllertest.SampleMesh(t), guarded)
}

// newLivingOf is newLivingGuarded for the description m.
func newLivingOf(t *testing.T, m *meshdesc.Mesh, guarded bool) *living {
	t.Helper()
	b := controllertest.NewBed(t, m)
	b.Start()
	b.Watch()
	ctx, cancel := context.WithCancel(context.Background())
	conns, err := b.StartBus(ctx, natsplane.ControllerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jss, err := conns.JetStreams()
	if err != nil {
		t.Fatal(err)
	}
	var decls []wire.Declaration
	if err := b.St.Update(ctx, func(tx store.Tx) error {
		decls, _, err = rollout.Declare(ctx, tx, b.M)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	key, err := b.St.DeclarationKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var guard *rollout.Guard
	stopGuard := func() {}
	if guarded {
		if guard, stopGuard, err = rollout.GuardDeclarations(ctx, conns, key, decls, nil); err != nil {
			t.Fatal(err)
		}
	} else if err := publishDeclarations(ctx, jss[wire.AccountControl], key, decls); err != nil {
		t.Fatal(err)
	}
	loop, stop, err := FollowControl(ctx, conns, b.M, b.St, b.Dir, b.Opts, guard, "")
	if err != nil {
		t.Fatal(err)
	}
	stopListening, err := status.ListenLiveness(ctx, conns, b.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stopAnswering, err := AnswerCredentials(ctx, conns, b.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopAnswering()
		stopListening()
		stop()
		stopGuard()
		conns.Close()
		cancel()
	})
	return &living{Bed: b, loop: loop, conns: conns}
}

// TestEnrolmentSpendsTheTokenAndSealsTheNodesCredential: the node enrols
// with the token it was issued, gets its own credential sealed to its key,
// connects as itself; the token's user and the credential the node had
// before no longer connect, and the token cannot be claimed again.
func TestEnrolmentSpendsTheTokenAndSealsTheNodesCredential(t *testing.T) {
	l := newLiving(t)
	before := l.Credential(wire.HostUser("node-a"))
	token := l.Issue("node-a")
	if token.Principal != wire.PrincipalEnrol {
		t.Fatalf("the token is %s's credential", token.User())
	}
	cred, key, err := controllertest.EnrolWith(t, token)
	if err != nil {
		t.Fatalf("enrol: %v", err)
	}
	if cred.User() != wire.HostUser("node-a") || cred.Password() == before.Password() {
		t.Fatalf("expected a new credential of %s, got %s's (new password: %v)", wire.HostUser("node-a"), cred.User(), cred.Password() != before.Password())
	}
	controllertest.DialEventually(t, cred)
	// Within its grace the spent token's user still logs in (the answer
	// may still be on its way); after, it is refused, as the old host
	// credential is.
	if nc, err := controllertest.DialWith(token); err != nil {
		t.Fatalf("the token's user refused within its grace: %v", err)
	} else {
		nc.Close()
	}
	refused := func(c wire.Credential) bool {
		nc, err := controllertest.DialWith(c)
		if err == nil {
			nc.Close()
		}
		return observe.RefusedLogin(err)
	}
	controllertest.Eventually(t, l.Opts.SpentTokenGrace+10*time.Second, "the token's user and the old host credential refused", func() bool {
		return refused(token) && refused(before)
	})
	nodes, err := l.St.Nodes(controllertest.Ctx(t))
	if err != nil || len(nodes) != 1 || nodes[0].Name != "node-a" || nodes[0].SealingKey != seal.EncodePublic(key.Public) {
		t.Fatalf("expected node-a recorded with its key, got %+v (%v)", nodes, err)
	}
	toks, err := l.St.Tokens(controllertest.Ctx(t))
	if err != nil || len(toks) != 1 || toks[0].Spent.IsZero() {
		t.Fatalf("expected the token spent, got %+v (%v)", toks, err)
	}
	controllertest.Eventually(t, 5*time.Second, "one enrolment applied and nothing else", func() bool {
		return l.loop.Counts() == ControlCounts{Enrolled: 1}
	})
}

// TestATokenIssuedAfterAGenesisWithoutTokensEnrols: a description that
// names no enrolment token still gives the server the enrolment account,
// so the first token issued later, whose user arrives by a reload, routes
// its claim to CONTROL and is answered.
func TestATokenIssuedAfterAGenesisWithoutTokensEnrols(t *testing.T) {
	m := controllertest.SampleMesh(t)
	m.Tokens = nil
	l := newLivingOf(t, controllertest.Revalidate(t, m), true)
	cred, _, err := controllertest.EnrolWith(t, l.Issue("node-a"))
	if err != nil {
		t.Fatalf("enrol: %v", err)
	}
	controllertest.DialEventually(t, cred)
	controllertest.Eventually(t, 5*time.Second, "one enrolment applied", func() bool {
		return l.loop.Counts() == ControlCounts{Enrolled: 1}
	})
}

// TestATokenIsSpentExactlyOnce: two nodes claim one token at once; one is
// enrolled, the other refused with the reason.
func TestATokenIsSpentExactlyOnce(t *testing.T) {
	l := newLiving(t)
	token := l.Issue("node-a")
	type result struct {
		cred wire.Credential
		err  error
	}
	results := make(chan result, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			// The loser's token user is revoked once the winner is
			// enrolled: its claim is then never sent.
			cred, _, err := controllertest.EnrolWithin(t, token, 5*time.Second)
			results <- result{cred, err}
		})
	}
	wg.Wait()
	close(results)
	var enrolled, refused, failed int
	for r := range results {
		switch {
		case r.err == nil:
			enrolled++
		case errors.Is(r.err, host.ErrRefused):
			refused++
			t.Logf("refused: %v", r.err)
		default:
			// The token's user may be revoked under the loser before its
			// claim is sent or answered: refused by the server instead.
			failed++
			t.Logf("not enrolled: %v", r.err)
		}
	}
	if enrolled != 1 || refused+failed != 1 {
		t.Fatalf("expected one node enrolled and the other not, got %d enrolled, %d refused, %d failed", enrolled, refused, failed)
	}
	// A loser whose connection the reload closed may still have had its
	// claim refused by the controller: at most one refusal.
	controllertest.Eventually(t, 5*time.Second, "one enrolment applied, at most one claim refused", func() bool {
		c := l.loop.Counts()
		return c.Enrolled == 1 && c.Refused >= refused && c.Refused <= 1
	})
}

// TestEnrolmentRefusals: an unknown token, a proof that is not the
// token's, an expired token; each answered with its reason, nothing
// recorded.
func TestEnrolmentRefusals(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	ctx := controllertest.Ctx(t)
	tok, doc, err := rollout.IssueToken(ctx, b.M, b.St, b.Dir, "node-a", time.Hour, b.Opts)
	if err != nil {
		t.Fatal(err)
	}
	cred, _ := wire.ParseCredential(doc)
	key, _ := seal.NewKey()
	request := func(token, proof string) []byte {
		return wire.EnrolRequest{Token: token, Proof: proof, SealingKey: seal.EncodePublic(key.Public), Reply: wire.EnrolInbox(token) + ".r"}.Marshal()
	}
	nothing := func(Enrolment) error { return nil }
	late := b.Opts
	late.Now = func() time.Time { return tok.Expires.Add(time.Second) }
	for i, c := range []struct {
		name, want string
		data       []byte
		o          rollout.Options
	}{
		{"unknown", "token tok-000000000000 is unknown", request("tok-000000000000", "x"), b.Opts},
		{"wrong proof", "the proof is not token " + tok.ID + "'s", request(tok.ID, "not-the-secret"), b.Opts},
		{"expired", "token " + tok.ID + " expired at", request(tok.ID, cred.Password()), late},
	} {
		e, err := Enrol(ctx, b.M, b.St, b.Dir, store.LedgerKey(wire.SubjectEnrol, "", 1000+uint64(i)), c.data, c.o, nothing)
		if err != nil || !bytes.Contains([]byte(e.Answer.Refused), []byte(c.want)) || e.Answer.Sealed != nil {
			t.Errorf("%s: expected refused %q, got %+v (%v)", c.name, c.want, e.Answer, err)
		}
	}
	if _, err := Enrol(ctx, b.M, b.St, b.Dir, "seq:1", []byte(`{"token":"x"}`), b.Opts, nothing); !errors.Is(err, rollout.ErrBadControl) {
		t.Errorf("a malformed request: expected ErrBadControl, got %v", err)
	}
	if nodes, err := b.St.Nodes(ctx); err != nil || len(nodes) != 0 {
		t.Errorf("a refused claim recorded a node: %+v (%v)", nodes, err)
	}
	// The refusals are in the ledger: the same message is answered alike.
	e, err := Enrol(ctx, b.M, b.St, b.Dir, store.LedgerKey(wire.SubjectEnrol, "", 1000), request(tok.ID, cred.Password()), b.Opts, nothing)
	if err != nil || !e.Replayed || e.Answer.Refused == "" {
		t.Errorf("a redelivered refusal: %+v (%v)", e, err)
	}
}

// TestARedeliveredEnrolmentAppliesOnce: the same message again (a
// redelivery, a controller killed between commit and ack) is answered
// from the ledger and changes nothing; the node asking again with its own
// key gets its own answer; another key is refused.
func TestARedeliveredEnrolmentAppliesOnce(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	ctx := controllertest.Ctx(t)
	_, key, req := b.Claim("node-a")
	var delivered []Enrolment
	deliver := func(e Enrolment) error { delivered = append(delivered, e); return nil }
	first, err := Enrol(ctx, b.M, b.St, b.Dir, store.LedgerKey(wire.SubjectEnrol, "m1", 5), req.Marshal(), b.Opts, deliver)
	if err != nil || first.Answer.Refused != "" {
		t.Fatalf("first: %+v (%v)", first, err)
	}
	secrets, _ := b.St.Secrets(ctx)
	again, err := Enrol(ctx, b.M, b.St, b.Dir, store.LedgerKey(wire.SubjectEnrol, "m1", 5), req.Marshal(), b.Opts, deliver)
	if err != nil || !again.Replayed || !bytes.Equal(again.Answer.Sealed, first.Answer.Sealed) {
		t.Fatalf("the same message again: %+v (%v)", again, err)
	}
	if now, _ := b.St.Secrets(ctx); now[wire.HostUser("node-a")] != secrets[wire.HostUser("node-a")] {
		t.Fatal("a redelivery minted the node a new password")
	}
	asked, err := Enrol(ctx, b.M, b.St, b.Dir, store.LedgerKey(wire.SubjectEnrol, "m2", 6), req.Marshal(), b.Opts, deliver)
	if err != nil || asked.Replayed || !bytes.Equal(asked.Answer.Sealed, first.Answer.Sealed) {
		t.Fatalf("the node asking again: %+v (%v)", asked, err)
	}
	other, _ := seal.NewKey()
	req.SealingKey = seal.EncodePublic(other.Public)
	stolen, err := Enrol(ctx, b.M, b.St, b.Dir, store.LedgerKey(wire.SubjectEnrol, "m3", 7), req.Marshal(), b.Opts, deliver)
	if err != nil || stolen.Answer.Refused == "" || stolen.Answer.Sealed != nil {
		t.Fatalf("another key claiming the spent token: %+v (%v)", stolen, err)
	}
	if len(delivered) != 4 {
		t.Errorf("expected every answer delivered, got %d", len(delivered))
	}
	opened, err := key.Open(first.Answer.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	if held, _ := b.St.Credential(ctx, wire.HostUser("node-a")); !bytes.Equal(opened, held) {
		t.Error("the sealed credential is not the one the store issued")
	}
}

// TestTheEnrolmentUserCanOnlyEnrol: the token's user may publish the
// request and hear its own inbox, nothing else: not a declaration, not
// another token's inbox, not CONTROL's API.
func TestTheEnrolmentUserCanOnlyEnrol(t *testing.T) {
	l := newLiving(t)
	token := l.Issue("node-a")
	nc := controllertest.DialEventually(t, token)
	var refusals []error
	var mu sync.Mutex
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		refusals = append(refusals, err)
		mu.Unlock()
	})
	for _, subject := range []string{wire.NodeDeclare("node-a"), wire.EnrolInbox("tok-other") + ".x", wire.SubjectModuleEvents} {
		if _, err := nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Publish(wire.NodeReport("node-a"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	controllertest.Eventually(t, 5*time.Second, "four permission violations", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refusals) >= 4
	})
	for _, err := range refusals {
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("expected a permission violation, got %v", err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := js.Stream(short, wire.StreamNodes); err == nil {
		t.Error("the enrolment user read NODES")
	}
}

// unavailableStore refuses updates with ErrStoreUnavailable while away is
// set, as a database that is down does.
type unavailableStore struct {
	store.Store
	mu   sync.Mutex
	away bool
}

func (s *unavailableStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.mu.Lock()
	away := s.away
	s.mu.Unlock()
	if away {
		return store.ErrStoreUnavailable
	}
	return s.Store.Update(ctx, fn)
}

func (s *unavailableStore) set(away bool) {
	s.mu.Lock()
	s.away = away
	s.mu.Unlock()
}

// TestAHeldEnrolmentStillReachesTheNode: while the store is away the
// request is held (nak with a delay) and comes again; once the store
// returns the controller answers, and the answer reaches the node still
// waiting on its inbox.
func TestAHeldEnrolmentStillReachesTheNode(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	st := &unavailableStore{Store: b.St}
	_, doc, err := rollout.IssueToken(controllertest.Ctx(t), b.M, b.St, b.Dir, "node-a", time.Hour, b.Opts)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := wire.ParseCredential(doc)
	st.set(true)
	b.Start()
	b.Watch()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns, err := b.StartBus(ctx, natsplane.ControllerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	loop, stop, err := FollowControl(ctx, conns, b.M, st, b.Dir, b.Opts, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	done := make(chan error, 1)
	go func() {
		_, _, err := controllertest.EnrolWith(t, token)
		done <- err
	}()
	controllertest.Eventually(t, 15*time.Second, "the request held twice", func() bool { return loop.Counts().Held >= 2 })
	st.set(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("enrol after the store came back: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no answer within 20s of the store's return")
	}
	// The answer leaves before the loop counts it.
	controllertest.Eventually(t, 5*time.Second, "one enrolment applied", func() bool { return loop.Counts().Enrolled == 1 })
	t.Logf("held %d times before the store came back", loop.Counts().Held)
}

// TestAHostEnrolsOnceThenRunsAsItself: the host enrols with its token,
// keeps its key and credential (0600), says it is alive as itself, and,
// started again without the token, runs on what it kept.
func TestAHostEnrolsOnceThenRunsAsItself(t *testing.T) {
	l := newLiving(t)
	token := l.Issue("node-a")
	tokenFile := filepath.Join(t.TempDir(), "token.json")
	if err := os.WriteFile(tokenFile, token.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	// Dialled once the server has reloaded for the token.
	alive := controllertest.DialEventually(t, l.Credential(wire.ControllerUser))
	heard, err := alive.SubscribeSync(wire.NodeAlive("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	state := host.State{Dir: filepath.Join(t.TempDir(), "host")}
	runHost := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- host.Run(ctx, host.Options{State: state, TokenFile: tokenFile, Heartbeat: 50 * time.Millisecond})
		}()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("host: %v", err)
			}
		}
	}
	stop := runHost()
	msg, err := heard.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("no heartbeat from node-a: %v", err)
	}
	stop()
	for _, name := range []string{"credential.json", "sealing-key.json"} {
		info, err := os.Stat(filepath.Join(state.Dir, name))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", name, err, info.Mode().Perm())
		}
	}
	if !bytes.Contains(msg.Data, []byte(`"node":"node-a"`)) {
		t.Errorf("heartbeat %q", msg.Data)
	}
	// Started again, without its token: it runs on what it kept.
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := heard.NextMsg(10 * time.Millisecond); err != nil {
			break // drained
		}
	}
	stop = runHost()
	defer stop()
	if _, err := heard.NextMsg(20 * time.Second); err != nil {
		t.Fatalf("no heartbeat after the restart: %v", err)
	}
	if c := l.loop.Counts(); c.Enrolled != 1 {
		t.Errorf("expected one enrolment, got %+v", c)
	}
}

// publishDeclarations publishes each declaration once, signed, as the
// guard would, without guarding them.
func publishDeclarations(ctx context.Context, js jetstream.JetStream, key ed25519.PrivateKey, decls []wire.Declaration) error {
	for _, d := range decls {
		body, sig, err := wire.SignDeclaration(key, d)
		if err != nil {
			return err
		}
		msg := &nats.Msg{Subject: wire.NodeDeclare(d.Node), Header: nats.Header{wire.HeaderSignature: []string{sig}}, Data: body}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			return err
		}
	}
	return nil
}

// TestLedgerKeysAreScopedBySubject: a message id is its publisher's to
// choose; the same id on another subject (a host's report, an enrolment)
// is another message.
func TestLedgerKeysAreScopedBySubject(t *testing.T) {
	if store.LedgerKey(wire.SubjectEnrol, "x", 1) == store.LedgerKey(wire.NodeReport("node-a"), "x", 2) {
		t.Error("a report's message id collides with an enrolment's")
	}
	if store.LedgerKey(wire.SubjectEnrol, "x", 1) != store.LedgerKey(wire.SubjectEnrol, "x", 9) {
		t.Error("a duplicate publish of one message is not recognised")
	}
	if store.LedgerKey(wire.SubjectEnrol, "", 1) == store.LedgerKey(wire.SubjectEnrol, "", 2) {
		t.Error("two messages without ids collide")
	}
}

// TestASealedAnswerThatDoesNotOpenIsRefused: an answer on the node's
// inbox whose sealed credential does not open with the node's key (here
// published by the test, as the controller, in place of the loop) is
// refused by the host with the reason, and nothing is taken from it.
func TestASealedAnswerThatDoesNotOpenIsRefused(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	b.Watch()
	ctx := controllertest.Ctx(t)
	conns, err := b.StartBus(ctx, natsplane.ControllerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conns.Close() })
	token := b.Issue("node-a")
	done := make(chan error, 1)
	go func() {
		_, _, err := controllertest.EnrolWith(t, token)
		done <- err
	}()
	js, err := jetstream.New(conns.Control)
	if err != nil {
		t.Fatal(err)
	}
	// The test takes the controller's place as CONTROL's consumer. The
	// token issued reloads the server (Watch), and a JetStream request
	// made during a reload may find no responder: asked again.
	var cons jetstream.Consumer
	controllertest.Eventually(t, 10*time.Second, "CONTROL's consumer bound", func() bool {
		cons, err = js.Consumer(ctx, wire.StreamControl, wire.ControlConsumer)
		return err == nil
	})
	msg, err := controllertest.NextWithin(cons, 15*time.Second)
	if err != nil {
		t.Fatalf("the claim did not reach CONTROL: %v", err)
	}
	req, err := wire.ParseEnrolRequest(msg.Data())
	if err != nil {
		t.Fatal(err)
	}
	other, _ := seal.NewKey()
	sealed, _ := seal.To(other.Public, []byte(`{"principal":"host"}`))
	if err := conns.Control.Publish(req.Reply, wire.EnrolAnswer{Node: "node-a", Sealed: sealed}.Marshal()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, seal.ErrOpen) || !strings.Contains(err.Error(), "not sealed to this node's key") {
			t.Fatalf("expected the answer refused as not opening, got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the host did not refuse the answer within 20s")
	}
}
