package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/mesh/build"
	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// builds is the state of a scenario on the build path (design 25 §9 step
// 4): the builds it asked for and the installations it pushed.
type builds struct {
	// committed is when the last revision was committed; content what
	// it held, by build id.
	committed time.Time
	content   map[string]string
	// delivered is the builders' consumer's delivered count when noted;
	// on AMQP, mark is the firehose's mark then.
	delivered uint64
	mark      int
	// build is the last build status showed built; pushed when its
	// installation was pushed.
	build  store.Build
	pushed time.Time
}

func (s *scenario) bindBuilds(sc *godog.ScenarioContext) {
	sc.Step(`^the repository "([^"]+)" commits revision "([^"]+)" of "([^"]+)" with the content "([^"]*)"$`, s.theRepositoryCommits)
	sc.Step(`^the repository "([^"]+)" announces revision "([^"]+)" of "([^"]+)", which it does not have$`, s.theRepositoryAnnounces)
	sc.Step(`^within (\d+) seconds status shows the build of "([^"]+)" at "([^"]+)" (built|failed)(?:, saying "([^"]+)")?$`, s.statusShowsTheBuild)
	sc.Step(`^the artifact ARTIFACTS holds for that build is the program of "([^"]+)" with the provenance of revision "([^"]+)" and its content$`, s.theArtifactIsThatRevision)
	sc.Step(`^I note how often the builders have been handed a build$`, s.iNoteTheBuildsDelivered)
	sc.Step(`^the builder is killed with SIGKILL while that build is in hand$`, s.theBuilderIsKilledMidBuild)
	sc.Step(`^the builders were handed that build (\d+) times, and status records it once$`, s.theBuildWasHanded)
	sc.Step(`^a push installs that build of "([^"]+)" on "([^"]+)"$`, s.aPushInstalls)
	sc.Step(`^within (\d+) seconds status shows "([^"]+)" installed that build of "([^"]+)", and runs it$`, s.statusShowsInstalled)
	sc.Step(`^the chunks ARTIFACTS holds of that build are overwritten with other bytes$`, s.theChunksAreOverwritten)
	sc.Step(`^within (\d+) seconds status shows "([^"]+)" refused that build, naming its digest and the one it fetched$`, s.statusShowsTheInstallRefused)
}

func (s *scenario) theRepositoryCommits(ctx context.Context, repo, revision, module, content string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	r.tainted = true
	if s.bd.content == nil {
		s.bd.content = map[string]string{}
	}
	s.bd.content[wire.BuildID(repo, module, revision)] = content
	s.bd.committed = time.Now()
	_, err = r.cluster.Commit(ctx, repo, module, revision, content)
	return err
}

// theRepositoryAnnounces announces a revision as the repository's own
// user, without committing it: the builder finds no such revision.
func (s *scenario) theRepositoryAnnounces(ctx context.Context, repo, revision, module string) error {
	if s.onAMQP() {
		s.r.tainted = true
		s.bd.committed = time.Now()
		return s.announceOnAMQP(ctx, repo, module, revision)
	}
	c, err := s.connect(ctx, wire.SourceUser(repo))
	if err != nil {
		return err
	}
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	s.r.tainted = true
	s.bd.committed = time.Now()
	change := wire.SourceChange{Repo: repo, Module: module, Revision: revision, At: time.Now().UTC()}
	_, err = js.Publish(ctx, wire.SourceChanged(repo), wire.Marshal(change), jetstream.WithMsgID(wire.SourceChangeMsgID(c.Opts.Password, wire.BuildID(repo, module, revision))))
	return err
}

func (s *scenario) statusShowsTheBuild(ctx context.Context, secs int, module, revision, outcome, saying string) error {
	err := eventually(ctx, time.Duration(secs)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(st.Builds, func(b store.Build) bool { return b.Module == module && b.Revision == revision })
		if i < 0 {
			return fmt.Errorf("status shows no build of %s at %s (builds: %+v)", module, revision, st.Builds)
		}
		b := st.Builds[i]
		if b.Outcome != outcome || !strings.Contains(b.Error, saying) {
			return fmt.Errorf("expected the build of %s at %s %s saying %q, status shows %+v", module, revision, outcome, saying, b)
		}
		s.bd.build = b
		return nil
	})
	if err == nil && !s.bd.committed.IsZero() {
		beds.Measure(ctx, "build: revision announced → outcome recorded", time.Since(s.bd.committed))
		s.bd.committed = time.Time{}
	}
	return err
}

// theArtifactIsThatRevision reads the artifact out of ARTIFACTS (on AMQP
// the artifacts' stream) as a reader with the controller's credential
// does, and reads its provenance.
func (s *scenario) theArtifactIsThatRevision(ctx context.Context, module, revision string) error {
	b := s.bd.build
	data, err := s.storedArtifact(ctx, b.Digest, b.Size)
	if err != nil {
		return err
	}
	p, err := build.ReadProvenance(data)
	if err != nil {
		return err
	}
	if want := s.bd.content[b.ID]; p.Module != module || p.Revision != revision || string(p.Content) != want {
		return fmt.Errorf("expected the artifact built from %s at %s (%q), its provenance is %s at %s (%q)", module, revision, want, p.Module, p.Revision, p.Content)
	}
	return nil
}

func (s *scenario) buildsProgress(ctx context.Context) (observe.Progress, error) {
	js, err := s.streamJetStream(ctx, wire.StreamBuilds)
	if err != nil {
		return observe.Progress{}, err
	}
	return observe.ProgressOn(ctx, js, wire.StreamBuilds, wire.BuildsConsumer)
}

func (s *scenario) iNoteTheBuildsDelivered(ctx context.Context) error {
	if s.onAMQP() {
		t, err := s.controlTrace(ctx)
		if err != nil {
			return err
		}
		s.bd.mark = t.Mark()
		return nil
	}
	p, err := s.buildsProgress(ctx)
	s.bd.delivered = p.Delivered
	return err
}

// theBuilderIsKilledMidBuild waits until the builders' consumer has a
// request out (the builder holds it: the repository answers after 2 s),
// then kills the builder.
func (s *scenario) theBuilderIsKilledMidBuild(ctx context.Context) error {
	err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		if s.onAMQP() {
			return s.aBuildInHandOnAMQP(ctx)
		}
		p, err := s.buildsProgress(ctx)
		if err != nil {
			return err
		}
		if p.Pending.AckPending != 1 {
			return fmt.Errorf("expected a build in hand, the builders' consumer shows %+v", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.inject(ctx, "builder", "kill")
}

func (s *scenario) theBuildWasHanded(ctx context.Context, times int) error {
	got, err := s.buildsHandedSinceNoted(ctx)
	if err != nil {
		return err
	}
	if got != uint64(times) {
		return fmt.Errorf("expected the builders handed the build %d times, they were handed %d", times, got)
	}
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, b := range st.Builds {
		if b.ID == s.bd.build.ID {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("expected one record of %s, status shows %d", s.bd.build.ID, n)
	}
	return nil
}

// aPushInstalls pushes the scenario's description with module installing
// the last build's artifact, and assigned to node.
func (s *scenario) aPushInstalls(ctx context.Context, module, node string) error {
	if _, err := s.cluster(); err != nil {
		return err
	}
	m := *s.mesh()
	m.Modules = slices.Clone(m.Modules)
	for i := range m.Modules {
		if m.Modules[i].Name == module {
			m.Modules[i].Artifact = s.bd.build.Digest
		}
	}
	m.Nodes = slices.Clone(m.Nodes)
	for i := range m.Nodes {
		if m.Nodes[i].Name == node && !slices.Contains(m.Nodes[i].Modules, module) {
			m.Nodes[i].Modules = append(slices.Clone(m.Nodes[i].Modules), module)
		}
	}
	s.bd.pushed = time.Now()
	return s.pushMesh(ctx, &m, "pushed-install.yaml")
}

func (s *scenario) installationOn(st fullStatus, node, module string) (status.Installation, bool) {
	i := slices.IndexFunc(st.Installations, func(in status.Installation) bool { return in.Node == node && in.Module == module })
	if i < 0 {
		return status.Installation{}, false
	}
	return st.Installations[i], true
}

func (s *scenario) statusShowsInstalled(ctx context.Context, secs int, node, module string) error {
	err := eventually(ctx, time.Duration(secs)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		in, ok := s.installationOn(st, node, module)
		n, _ := nodeStatus(st, node)
		if _, running := n.Running[module]; !ok || in.Outcome != status.Installed || in.Artifact != s.bd.build.Digest || !running || !n.RolledOut() {
			return fmt.Errorf("expected %s to have installed %s and run it; status shows %+v, node %+v", node, s.bd.build.Digest, in, n)
		}
		return nil
	})
	if err == nil && !s.bd.pushed.IsZero() {
		beds.Measure(ctx, "install: push declared → installed reported", time.Since(s.bd.pushed))
		s.bd.pushed = time.Time{}
	}
	return err
}

// theChunksAreOverwritten replaces the first chunk of the last build's
// artifact with as many other bytes, with the builder's credential, the
// one that may write there (on AMQP: puts it again into the stream, whose
// newest copy of a chunk is the one copied to a host).
func (s *scenario) theChunksAreOverwritten(ctx context.Context) error {
	size := min(s.bd.build.Size, int64(wire.ArtifactChunkSize))
	if s.onAMQP() {
		return s.overwriteChunkOnAMQP(ctx, s.bd.build.Digest, make([]byte, size))
	}
	c, err := s.connect(ctx, wire.BuilderUser)
	if err != nil {
		return err
	}
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	_, err = js.Publish(ctx, wire.ArtifactChunk(s.bd.build.Digest, 0), make([]byte, size))
	return err
}

func (s *scenario) statusShowsTheInstallRefused(ctx context.Context, secs int, node string) error {
	s.bd.pushed = time.Time{} // the push refused is not an installation to measure
	return eventually(ctx, time.Duration(secs)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		in, ok := s.installationOn(st, node, s.bd.build.Module)
		if !ok || in.Outcome != status.InstallRefused || strings.Count(in.Reason, "sha256:") < 2 {
			return fmt.Errorf("expected %s to refuse %s, naming it and the digest it fetched; status shows %+v", node, s.bd.build.Digest, in)
		}
		return nil
	})
}
