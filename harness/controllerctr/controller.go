// Package controllerctr runs the mesh controller's container (image
// mesh-controller) for the harness, shaped like a testcontainers-go
// module: Run applies this package's defaults first and the caller's
// options after.
package controllerctr

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Paths inside the container.
const (
	// StateDir is the controller's state: TLS material, secrets, the
	// composed nats configuration, the credentials.
	StateDir = "/var/lib/mesh"
	// MeshDir holds the mesh descriptions; MeshFile is the current one.
	MeshDir  = "/mesh"
	MeshFile = MeshDir + "/mesh.yaml"
)

// Binary is mesh-controller in the image: its entrypoint, and what a
// command run in a running controller's container (docker exec) starts.
const Binary = "/mesh-controller"

// ReadyLog is what `mesh-controller run` logs once the streams and
// consumers are asserted. The image has no shell, so readiness is read
// from the logs.
const ReadyLog = `"msg":"ready"`

// DefaultStartupTimeout bounds the wait for ReadyLog.
const DefaultStartupTimeout = 60 * time.Second

// ControllerContainer is a running controller container.
type ControllerContainer struct {
	*testcontainers.DockerContainer
}

// Args is the command line of a controller subcommand (genesis, apply,
// run) on the description named file in MeshDir and the state in StateDir.
func Args(subcommand, file string) []string {
	return []string{subcommand, "--mesh", path.Join(MeshDir, file), "--state", StateDir}
}

// Run starts `mesh-controller run` on MeshFile from image and waits until
// it is ready. On error the container, if one was created, is returned
// too, so the caller can read its logs and remove it.
func Run(ctx context.Context, image string, opts ...testcontainers.ContainerCustomizer) (*ControllerContainer, error) {
	defaults := []testcontainers.ContainerCustomizer{
		testcontainers.WithCmd(Args("run", path.Base(MeshFile))...),
		testcontainers.WithWaitStrategy(wait.ForLog(ReadyLog).WithStartupTimeout(DefaultStartupTimeout)),
	}
	ctr, err := testcontainers.Run(ctx, image, append(defaults, opts...)...)
	var c *ControllerContainer
	if ctr != nil {
		c = &ControllerContainer{DockerContainer: ctr}
	}
	if err != nil {
		return c, fmt.Errorf("run controller: %w", err)
	}
	return c, nil
}

// WithStateDir binds the host directory dir at StateDir.
func WithStateDir(dir string) testcontainers.CustomizeRequestOption {
	return withBind(dir + ":" + StateDir)
}

// WithMeshDir binds the host directory dir, read-only, at MeshDir. A
// directory, not a file: descriptions staged later are seen by the next
// container, and a replaced file is seen at all.
func WithMeshDir(dir string) testcontainers.CustomizeRequestOption {
	return withBind(dir + ":" + MeshDir + ":ro")
}

// WithStartupTimeout replaces the wait for ReadyLog with one of timeout.
func WithStartupTimeout(timeout time.Duration) testcontainers.CustomizeRequestOption {
	return testcontainers.WithWaitStrategyAndDeadline(timeout, wait.ForLog(ReadyLog).WithStartupTimeout(timeout))
}

func withBind(bind string) testcontainers.CustomizeRequestOption {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.Binds = append(hc.Binds, bind)
	})
}

// storeEither are the subcommands that read either the state directory's
// files or a store (--state DIR | --store URL), never both.
var storeEither = map[string]bool{"status": true, "credential": true}

// StoreArgs is the controller's command line args kept in the PostgreSQL
// store at url: for status and credential, which read one or the other,
// --state and its value give way to --store; every other subcommand keeps
// its --state (the nats/ configuration the nats container reads) and is
// given --store after its subcommand (token's verb too), before any
// positional argument. Args already naming a store are returned as they
// are.
func StoreArgs(args []string, url string) []string {
	if len(args) == 0 || url == "" {
		return args
	}
	for _, a := range args {
		if a == "--store" || strings.HasPrefix(a, "--store=") {
			return args
		}
	}
	if storeEither[args[0]] {
		out := make([]string, 0, len(args)+1)
		replaced := false
		for i := 0; i < len(args); i++ {
			switch {
			case args[i] == "--state" && i+1 < len(args):
				out = append(out, "--store", url)
				i++
				replaced = true
			case strings.HasPrefix(args[i], "--state="):
				out = append(out, "--store", url)
				replaced = true
			default:
				out = append(out, args[i])
			}
		}
		if !replaced {
			out = append([]string{out[0], "--store", url}, out[1:]...)
		}
		return out
	}
	n := 1
	if (args[0] == "token" || args[0] == "person") && len(args) > 1 {
		n = 2 // the verb
	}
	out := append(slices.Clone(args[:n]), "--store", url)
	return append(out, args[n:]...)
}

// WithStore keeps the controller's state in the PostgreSQL store at url:
// the container's command, whatever it is by then, is rewritten by
// StoreArgs. Give it after the command (testcontainers.WithCmd).
func WithStore(url string) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		req.Cmd = StoreArgs(req.Cmd, url)
		return nil
	}
}

// TokenArgs is the command line of `token issue` for node, on the
// description named file in MeshDir and the state in StateDir: a token
// good for ttl and keeping its user for grace once spent or expired (the
// controller's defaults where zero).
func TokenArgs(file, node string, ttl, grace time.Duration) []string {
	args := append([]string{"token", "issue"}, Args("", file)[1:]...)
	if ttl > 0 {
		args = append(args, "--ttl", ttl.String())
	}
	if grace > 0 {
		args = append(args, "--grace", grace.String())
	}
	return append(args, node)
}

// PersonIssueArgs is the command line of `person issue` for name, who
// may call tools (an administrator when admin), its credential sealed to
// key, on the description file in the mesh directory.
func PersonIssueArgs(file, name string, tools []string, admin bool, key string) []string {
	args := append([]string{"person", "issue"}, Args("", file)[1:]...)
	if admin {
		args = append(args, "--admin")
	} else {
		args = append(args, "--tools", strings.Join(tools, ","))
	}
	return append(args, "--key", key, name)
}

// PersonRevokeArgs is the command line of `person revoke` for name.
func PersonRevokeArgs(file, name string) []string {
	return append(append([]string{"person", "revoke"}, Args("", file)[1:]...), name)
}

// CredentialArgs is the command line of `credential` for user, reading
// the state directory's file store (StoreArgs trades it for a store).
func CredentialArgs(user string) []string {
	return []string{"credential", "--state", StateDir, user}
}

// StatusArgs is the command line of `status --json`, reading the state
// directory's file store (StoreArgs trades it for a store).
func StatusArgs() []string {
	return []string{"status", "--json", "--state", StateDir}
}
