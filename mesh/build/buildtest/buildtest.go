// Package buildtest raises, in-process, the part of a mesh the build path
// runs on, for the tests of the builder, the artifact store, mesh-build
// and the source stand-in: a real nats-server with TLS (so that every
// principal dials through link.Dial and its pinned certificate, as in a
// bed), one account holding the controller, the builder, the source
// repository Repo and a reader host, each with exactly the grants the
// build path gives it, and the streams and the builders' consumer the
// controller would create.
package buildtest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// Repo is the bed's source repository.
const Repo = "modules"

// ReaderNode is the node whose host reads artifacts in the bed: its user
// may make direct gets of ARTIFACTS' chunks and nothing else.
const ReaderNode = "node-a"

// AckWait is the builders' consumer's, as the controller creates it.
const AckWait = 10 * time.Second

// Users of the bed.
var (
	Controller = wire.ControllerUser
	Builder    = wire.BuilderUser
	Source     = wire.SourceUser(Repo)
	Reader     = wire.HostUser(ReaderNode)
)

// Bed is a running server and every user's credential.
type Bed struct {
	Server *server.Server
	// Creds maps each user to its credential, pointed at this server.
	Creds map[string]wire.Credential

	t testing.TB
}

// Start raises the bed; it is torn down when the test ends.
func Start(t testing.TB) *Bed {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca, err := pki.NewCA("buildtest", now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServer([]string{"localhost", "127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write(t, certFile, certPEM)
	write(t, keyFile, keyPEM)

	srv, _ := natstest.ServeConfig(t, Config(certFile, keyFile, filepath.Join(dir, "js")))
	b := &Bed{Server: srv, t: t, Creds: map[string]wire.Credential{}}
	addr := srv.Addr().String()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	for user, c := range map[string]wire.Credential{
		Controller: {Principal: wire.PrincipalController},
		Builder:    {Principal: wire.PrincipalBuilder},
		Source:     {Principal: wire.PrincipalSource, Name: Repo},
		Reader:     {Principal: wire.PrincipalHost, Node: ReaderNode, DeclarationKey: wire.EncodeDeclarationKey(pub)},
	} {
		c.URL = wire.BusURL(user, password(user), addr)
		c.Fingerprint = fp
		if err := c.Validate(); err != nil {
			t.Fatalf("credential of %s: %v", user, err)
		}
		b.Creds[user] = c
	}
	b.createStreams()
	return b
}

func password(user string) string { return "pw-" + user }

// Config is the server's configuration, as JSON: TLS, JetStream in
// storeDir, one account with the four users and their grants.
func Config(certFile, keyFile, storeDir string) string {
	type perms struct {
		Publish        map[string][]string `json:"publish"`
		Subscribe      map[string][]string `json:"subscribe"`
		AllowResponses bool                `json:"allow_responses,omitempty"`
	}
	type user struct {
		User        string `json:"user"`
		Password    string `json:"password"`
		Permissions perms  `json:"permissions"`
	}
	allow := func(s ...string) map[string][]string { return map[string][]string{"allow": s} }
	users := []user{
		{Controller, password(Controller), perms{Publish: allow(">"), Subscribe: allow(">")}},
		{Builder, password(Builder), perms{
			Publish: allow(
				wire.ConsumerInfo(wire.StreamBuilds, wire.BuildsConsumer),
				wire.ConsumerNext(wire.StreamBuilds, wire.BuildsConsumer),
				wire.ConsumerAcks(wire.StreamBuilds, wire.BuildsConsumer),
				wire.SubjectBuilt,
				wire.SubjectArtifactsAll,
				wire.SourceFetch("*"),
			),
			Subscribe: allow(wire.Under(wire.BuilderInbox)),
		}},
		// As composed (docs/decisions/0007): a repository answers a
		// fetch under the builder's inbox, and nowhere else.
		{Source, password(Source), perms{
			Publish:   allow(wire.SourceChanged(Repo), wire.Under(wire.BuilderInbox)),
			Subscribe: allow(wire.SourceFetch(Repo), wire.Under(wire.SourceInbox(Repo))),
		}},
		{Reader, password(Reader), perms{
			Publish:   allow(wire.DirectGetLast(wire.StreamArtifacts, wire.SubjectArtifactsAll)),
			Subscribe: allow(wire.Under(wire.HostInbox(ReaderNode))),
		}},
	}
	conf := map[string]any{
		"server_name": "buildtest",
		"listen":      "127.0.0.1:-1",
		"tls":         map[string]any{"cert_file": certFile, "key_file": keyFile, "timeout": 5},
		"jetstream":   map[string]any{"store_dir": storeDir},
		"accounts": map[string]any{
			wire.AccountControl: map[string]any{"jetstream": "enabled", "users": users},
		},
	}
	// The server's parser knows no \u escapes: '>' stays itself.
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(conf)
	return out.String()
}

// Streams are the build path's, as the controller creates them.
var Streams = []jetstream.StreamConfig{
	{
		Name:      wire.StreamControl,
		Subjects:  []string{wire.SubjectBuilt, wire.SubjectSourceChanges},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
	},
	{
		Name:      wire.StreamBuilds,
		Subjects:  []string{wire.SubjectBuildAll},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
	},
	{
		Name:              wire.StreamArtifacts,
		Subjects:          []string{wire.SubjectArtifactsAll},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		MaxMsgsPerSubject: 1,
		AllowDirect:       true,
	},
}

// BuildsConsumer is the builders' shared consumer, as the controller
// creates it: one build at a time.
var BuildsConsumer = jetstream.ConsumerConfig{
	Durable:       wire.BuildsConsumer,
	AckPolicy:     jetstream.AckExplicitPolicy,
	DeliverPolicy: jetstream.DeliverAllPolicy,
	MaxAckPending: 1,
	AckWait:       AckWait,
}

func (b *Bed) createStreams() {
	ctx := Context(b.t)
	js := b.JetStream()
	for _, cfg := range Streams {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			b.t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
	}
	if _, err := js.CreateConsumer(ctx, wire.StreamBuilds, BuildsConsumer); err != nil {
		b.t.Fatalf("create consumer: %v", err)
	}
}

// Context is bounded by the test's deadline, or a minute.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Dial connects as user through link.Dial; the connection is closed when
// the test ends.
func (b *Bed) Dial(user string, opts ...link.Option) *nats.Conn {
	b.t.Helper()
	nc, err := link.Dial(Context(b.t), b.cred(user), opts...)
	if err != nil {
		b.t.Fatalf("dial as %s: %v", user, err)
	}
	b.t.Cleanup(nc.Close)
	return nc
}

func (b *Bed) cred(user string) wire.Credential {
	b.t.Helper()
	c, ok := b.Creds[user]
	if !ok {
		b.t.Fatalf("no credential for user %q", user)
	}
	return c
}

// CredentialFile writes user's credential document into dir and returns
// its path.
func (b *Bed) CredentialFile(dir, user string) string {
	b.t.Helper()
	path := filepath.Join(dir, user+".json")
	write(b.t, path, b.cred(user).Marshal())
	return path
}

// JetStream is the controller's view of the bed, which tests use to ask
// for builds and to observe the streams.
func (b *Bed) JetStream() jetstream.JetStream {
	b.t.Helper()
	js, err := jetstream.New(b.Dial(Controller))
	if err != nil {
		b.t.Fatal(err)
	}
	return js
}

// Violations records the asynchronous errors a connection hears: a
// permissions violation is reported only this way.
type Violations struct{ ch chan error }

// NewViolations is an empty record.
func NewViolations() *Violations { return &Violations{ch: make(chan error, 64)} }

// Handler is the link.Option that feeds the record.
func (v *Violations) Handler() link.Option {
	return link.WithErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case v.ch <- err:
		default:
		}
	})
}

// Next waits up to d for an error; nil if none came.
func (v *Violations) Next(d time.Duration) error {
	select {
	case err := <-v.ch:
		return err
	case <-time.After(d):
		return nil
	}
}

// All is every error heard so far.
func (v *Violations) All() []error {
	var out []error
	for {
		select {
		case err := <-v.ch:
			out = append(out, err)
		default:
			return out
		}
	}
}

// Request asks for the build of module at revision of Repo, as the
// controller does.
func Request(ctx context.Context, js jetstream.JetStream, module, revision string) (wire.BuildRequest, error) {
	req := wire.BuildRequest{
		ID:       wire.BuildID(Repo, module, revision),
		Repo:     Repo,
		Module:   module,
		Revision: revision,
		Asked:    time.Now().UTC(),
	}
	_, err := js.Publish(ctx, wire.SubjectBuildRequest, wire.Marshal(req))
	return req, err
}

// Outcomes is how many outcomes CONTROL holds.
func Outcomes(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	return Count(ctx, js, wire.StreamControl, wire.SubjectBuilt)
}

// Count is how many messages stream holds on subject (a wildcard
// counts every subject it matches).
func Count(ctx context.Context, js jetstream.JetStream, stream, subject string) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// LastOutcome is the newest outcome CONTROL holds, read and checked as
// the controller would.
func LastOutcome(ctx context.Context, js jetstream.JetStream) (wire.Built, error) {
	s, err := js.Stream(ctx, wire.StreamControl)
	if err != nil {
		return wire.Built{}, err
	}
	msg, err := s.GetLastMsgForSubject(ctx, wire.SubjectBuilt)
	if err != nil {
		return wire.Built{}, err
	}
	return wire.ParseBuilt(msg.Data)
}

// WaitOutcome polls CONTROL until it holds an outcome, up to within.
func WaitOutcome(t testing.TB, js jetstream.JetStream, within time.Duration) wire.Built {
	t.Helper()
	var b wire.Built
	Eventually(t, within, "an outcome in CONTROL", func() bool {
		var err error
		b, err = LastOutcome(Context(t), js)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false
		}
		if err != nil {
			t.Fatalf("read outcome: %v", err)
		}
		return true
	})
	return b
}

// BuildsState is the builders' consumer as the server sees it.
func BuildsState(ctx context.Context, js jetstream.JetStream) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, wire.StreamBuilds, wire.BuildsConsumer)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// Eventually polls cond every 50 ms until it holds, failing the test
// after within.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("expected %s within %s, got none", what, within)
		}
		time.Sleep(50 * time.Millisecond) // a poll interval, bounded by the deadline
	}
}

// Repository answers fetches as the bed's source repository Repo, with
// its grants, from revisions ("<module>@<revision>" to content), each
// answer after delay; it stops when the test ends.
func Repository(t testing.TB, bed *Bed, revisions map[string]string, delay time.Duration) {
	t.Helper()
	nc := bed.Dial(Source)
	sub, err := nc.Subscribe(wire.SourceFetch(Repo), func(m *nats.Msg) {
		req, err := wire.ParseFetchRequest(m.Data)
		if err != nil {
			_ = m.Respond(wire.Marshal(wire.FetchAnswer{Error: err.Error()}))
			return
		}
		time.Sleep(delay) // a slow repository, not a wait for something
		ans := wire.FetchAnswer{Module: req.Module, Revision: req.Revision}
		if c, ok := revisions[req.Module+"@"+req.Revision]; ok {
			ans.Content = []byte(c)
		} else {
			ans.Error = "no file " + req.Module + "/" + req.Revision
		}
		_ = m.Respond(wire.Marshal(ans))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

// Toolchain writes a toolchain directory holding an executable program for
// each module, whose content is program, and returns its path.
func Toolchain(t testing.TB, program []byte, modules ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, m := range modules {
		if err := os.WriteFile(filepath.Join(dir, m), program, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
