package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/build/buildtest"
	"github.com/meshbus/mesh/mesh/wire"
)

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	builder := wire.Credential{URL: "tls://builder:pw@127.0.0.1:4222", Fingerprint: strings.Repeat("a", 64), Principal: wire.PrincipalBuilder}
	builderFile := filepath.Join(dir, "builder.json")
	if err := os.WriteFile(builderFile, builder.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	commit := func(extra ...string) []string {
		return append([]string{"commit", "--credential", builderFile, "--repo", dir}, extra...)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 0, "Usage:"},
		{[]string{"--help"}, 0, "source serve  --credential FILE --repo DIR [--delay D]"},
		{[]string{"serve", "--help"}, 0, "Flags of serve:"},
		{[]string{"commit", "-h"}, 0, "-revision R"},
		{[]string{"push"}, 2, `unknown command "push"`},
		{[]string{"serve"}, 2, "--credential FILE and --repo DIR are required"},
		{[]string{"serve", "--credential", builderFile, "--repo", dir, "--delay", "-1s"}, 2, "--delay -1s is negative"},
		{[]string{"serve", "--credential", builderFile, "--repo", dir, "--module", "m"}, 2, "flag provided but not defined: -module"},
		{[]string{"serve", "--credential", builderFile, "--repo", dir, "extra"}, 2, `unexpected argument "extra"`},
		{commit("--revision", "r1", "--content", "x"), 2, "--module M and --revision R are required"},
		{commit("--module", "Sensor", "--revision", "r1", "--content", "x"), 2, `module: invalid name: "Sensor" must start with a lower-case letter`},
		{commit("--module", "sensor", "--revision", "../r1", "--content", "x"), 2, `revision: "../r1" is not a revision`},
		{commit("--module", "sensor", "--revision", "r1"), 2, "--content TEXT is required, and not empty"},
		{commit("--module", "sensor", "--revision", "r1", "--content", "x", "--timeout", "0s"), 2, "--timeout 0s is not positive"},
		{commit("--module", "sensor", "--revision", "r1", "--content", "x"), 1, `principal "builder", want "source"`},
		{[]string{"serve", "--credential", builderFile, "--repo", filepath.Join(dir, "absent")}, 1, "repository directory: stat"},
		{[]string{"serve", "--credential", filepath.Join(dir, "absent.json"), "--repo", dir}, 1, "credential: open"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String()+errOut.String(), c.want) {
			t.Errorf("source %v: expected exit %d with %q, got %d:\n%s%s", c.args, c.code, c.want, code, out.String(), errOut.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("expected nothing written by refused commits, got %v", entries)
	}
}

// TestCommitWritesAndAnnounces: a commit is a file written whole and an
// announcement CONTROL holds; again with the same content it is
// announced once; with other content it is refused and nothing changes.
func TestCommitWritesAndAnnounces(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	cred := bed.CredentialFile(t.TempDir(), buildtest.Source)
	repo := t.TempDir()
	commit := func(content string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"commit", "--credential", cred, "--repo", repo, "--module", "sensor", "--revision", "r1", "--content", content}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := commit("sensor at r1\n")
	if code != 0 {
		t.Fatalf("expected exit 0, got %d:\n%s", code, errOut)
	}
	var printed wire.SourceChange
	if err := json.Unmarshal([]byte(out), &printed); err != nil || printed.Repo != buildtest.Repo || printed.Module != "sensor" || printed.Revision != "r1" {
		t.Fatalf("expected the announcement printed, got %q (%v)", out, err)
	}
	if data, err := os.ReadFile(filepath.Join(repo, "sensor", "r1")); err != nil || string(data) != "sensor at r1\n" {
		t.Fatalf("expected the revision written, got %q (%v)", data, err)
	}
	entries, _ := os.ReadDir(filepath.Join(repo, "sensor"))
	if len(entries) != 1 {
		t.Fatalf("expected the revision alone (no temporary file left), got %v", entries)
	}

	s, err := js.Stream(ctx, wire.StreamControl)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(ctx, wire.SourceChanged(buildtest.Repo))
	if err != nil {
		t.Fatalf("expected CONTROL to hold the announcement, got %v", err)
	}
	stored, err := wire.ParseSourceChange(msg.Data)
	if err != nil || stored != printed {
		t.Fatalf("expected the stored announcement to be the printed one, got %+v (%v)", stored, err)
	}

	if code, _, errOut := commit("sensor at r1\n"); code != 0 {
		t.Fatalf("expected the same commit again to succeed, got %d:\n%s", code, errOut)
	}
	if n, err := buildtest.Count(ctx, js, wire.StreamControl, wire.SourceChanged(buildtest.Repo)); err != nil || n != 1 {
		t.Fatalf("expected the announcement stored once, got %d (%v)", n, err)
	}

	code, _, errOut = commit("something else")
	if code != 1 || !strings.Contains(errOut, "revision r1 of sensor is already in the repository with other content") {
		t.Fatalf("expected a rewrite refused with exit 1, got %d:\n%s", code, errOut)
	}
	if data, _ := os.ReadFile(filepath.Join(repo, "sensor", "r1")); string(data) != "sensor at r1\n" {
		t.Fatalf("expected the revision unchanged, got %q", data)
	}
}

// TestCommitWithoutAcknowledgementFails: no CONTROL to take the
// announcement is exit 1, within the timeout.
func TestCommitWithoutAcknowledgementFails(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	if err := bed.JetStream().DeleteStream(ctx, wire.StreamControl); err != nil {
		t.Fatal(err)
	}
	cred := bed.CredentialFile(t.TempDir(), buildtest.Source)
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"commit", "--credential", cred, "--repo", t.TempDir(), "--module", "sensor", "--revision", "r1", "--content", "x", "--timeout", "3s"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "revision r1 of sensor is written but not announced") {
		t.Fatalf("expected exit 1 saying it was not announced, got %d:\n%s", code, errOut.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("expected the failure within the 3s timeout, got it after %s", took)
	}
	if out.Len() != 0 {
		t.Fatalf("expected no announcement printed, got %q", out.String())
	}
}

// TestServeAnswersFetches: the builder's fetch gets the revision's
// content, a revision not there an answer saying so, and the answers wait
// the delay.
func TestServeAnswersFetches(t *testing.T) {
	bed := buildtest.Start(t)
	cred := bed.CredentialFile(t.TempDir(), buildtest.Source)
	repo := repository{dir: t.TempDir()}
	if err := repo.write("sensor", "r1", []byte("sensor at r1")); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stderr testutil.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"serve", "--credential", cred, "--repo", repo.dir, "--delay", "300ms"}, &bytes.Buffer{}, &stderr)
	}()
	builder := bed.Dial(buildtest.Builder)
	fetch := func(module, revision string) (wire.FetchAnswer, time.Duration) {
		t.Helper()
		start := time.Now()
		m, err := builder.Request(wire.SourceFetch(buildtest.Repo), wire.Marshal(wire.FetchRequest{Module: module, Revision: revision}), 5*time.Second)
		if err != nil {
			t.Fatalf("fetch %s@%s: %v\n%s", module, revision, err, stderr.String())
		}
		a, err := wire.ParseFetchAnswer(m.Data)
		if err != nil {
			t.Fatalf("fetch %s@%s: %v", module, revision, err)
		}
		return a, time.Since(start)
	}
	// Until the repository has subscribed, nobody answers.
	buildtest.Eventually(t, 10*time.Second, "the repository serving", func() bool {
		_, err := builder.Request(wire.SourceFetch(buildtest.Repo), wire.Marshal(wire.FetchRequest{Module: "sensor", Revision: "r1"}), 2*time.Second)
		return err == nil
	})

	a, took := fetch("sensor", "r1")
	if string(a.Content) != "sensor at r1" || a.Error != "" || a.Module != "sensor" || a.Revision != "r1" {
		t.Fatalf("expected the content of sensor@r1, got %+v", a)
	}
	if took < 300*time.Millisecond {
		t.Fatalf("expected the answer after the 300ms delay, got it after %s", took)
	}
	if a, _ := fetch("sensor", "r9"); a.Error != "no such revision: sensor/r9" || a.Content != nil {
		t.Fatalf("expected an answer saying r9 is not there, got %+v", a)
	}
	m, err := builder.Request(wire.SourceFetch(buildtest.Repo), []byte(`{"module":"sensor","revision":"../../etc/passwd"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := wire.ParseFetchAnswer(m.Data); err != nil || !strings.Contains(a.Error, "fetch refused: malformed build message: revision:") {
		t.Fatalf("expected a malformed fetch refused in the answer, got %+v (%v)", a, err)
	}

	stop()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("expected exit 0 when told to stop, got %d:\n%s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("expected serve to return within 10s of being told to stop")
	}
}

func TestRepositoryRefusesEmptyAndLarge(t *testing.T) {
	repo := repository{dir: t.TempDir()}
	if err := repo.write("sensor", "r1", nil); err == nil || !strings.Contains(err.Error(), "content is empty") {
		t.Fatalf("expected empty content refused, got %v", err)
	}
	if err := repo.write("sensor", "r1", make([]byte, wire.MaxSourceContent+1)); err == nil || !strings.Contains(err.Error(), "more than a revision may carry") {
		t.Fatalf("expected content over the limit refused, got %v", err)
	}
	if err := os.MkdirAll(filepath.Join(repo.dir, "sensor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo.dir, "sensor", "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.read("sensor", "empty"); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("expected an empty file not served as a revision, got %v", err)
	}
}
