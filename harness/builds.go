package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/container"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/meshbus/mesh/harness/controllerctr"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/wire"
)

// The build path's members (design 25 §9 step 4): a source repository,
// the stand-in, named by its repository, and the builder. Each connects
// with the credential genesis minted for it, put into its container.

// Ready lines of the two programs, read from their JSON logs (no shell in
// the images).
const (
	sourceReady  = `"msg":"repository serving"`
	builderReady = `"msg":"builder ready"`
	// SourceRepoDir is where the stand-in keeps its revisions.
	SourceRepoDir = "/var/lib/source"
)

// startSource raises the repository m.Name, its revisions in a directory
// of the work directory bound at SourceRepoDir, so that they outlive a
// restart of its container (and a person can read them).
func (c *Cluster) startSource(ctx context.Context, m topology.Member) error {
	dir := filepath.Join(c.s.work, "sources", m.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("start source %s: %w", m.Name, err)
	}
	bind := testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.Binds = append(hc.Binds, dir+":"+SourceRepoDir)
	})
	return c.startBuildMember(ctx, m.Name, c.images.source, wire.SourceUser(m.Name), sourceReady, bind)
}

func (c *Cluster) startBuilder(ctx context.Context, m topology.Member) error {
	return c.startBuildMember(ctx, m.Name, c.images.builder, wire.BuilderUser, builderReady)
}

// startBuildMember raises role from image with user's credential, on the
// private network under role's name, waited for until it logs ready.
func (c *Cluster) startBuildMember(ctx context.Context, role, image, user, ready string, more ...testcontainers.ContainerCustomizer) error {
	doc, err := c.controllerStdout(ctx, "credential", controllerctr.CredentialArgs(user))
	if err != nil {
		return fmt.Errorf("start %s: its credential: %w", role, err)
	}
	opts := append(c.s.common(role),
		testcontainers.WithFiles(testcontainers.ContainerFile{Reader: bytes.NewReader(doc), ContainerFilePath: images.BuilderCredential, FileMode: 0o644}),
		network.WithNetworkName([]string{role}, c.networks[Private]),
		testcontainers.WithWaitStrategyAndDeadline(c.readyTimeout, wait.ForLog(ready).WithStartupTimeout(c.readyTimeout)),
	)
	opts = append(opts, more...)
	ctr, runErr := testcontainers.Run(ctx, image, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := c.s.adopt(ctx, role, ready, c.readyTimeout, got, runErr)
	if h != nil {
		c.setRole(role, h)
	}
	if err != nil {
		return err
	}
	c.s.narrate("%s up as %s", role, user)
	return nil
}

// Commit has the source repository repo commit revision of module with
// content and announce it, as `source commit` in its container; it
// returns what the command printed.
func (c *Cluster) Commit(ctx context.Context, repo, module, revision, content string) (string, error) {
	h, err := c.Member(repo)
	if err != nil {
		return "", err
	}
	exit, out, err := h.Exec(ctx, "/source", "commit", "--credential="+images.BuilderCredential, "--repo="+SourceRepoDir,
		"--module="+module, "--revision="+revision, "--content="+content)
	if err != nil {
		return "", err
	}
	if exit != 0 {
		return "", fmt.Errorf("source commit %s@%s exited %d: %s", module, revision, exit, strings.TrimSpace(out))
	}
	return out, nil
}
