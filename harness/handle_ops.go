package harness

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// What the faults do to a container, one engine call each. Each returns
// once the engine has done it; the faults check that it took effect.

// Kill sends the container's first process sig (a name: KILL, TERM …).
// KILL ends the container at once, with no chance to clean up.
func (c *Handle) Kill(ctx context.Context, sig string) error {
	c.disturbed.Store(true)
	if _, err := c.docker.ContainerKill(ctx, c.id, client.ContainerKillOptions{Signal: sig}); err != nil {
		return infra("kill "+c.role+" with "+sig, err)
	}
	return nil
}

// Pause freezes every process of the container (the cgroup freezer): it
// holds its connections open and answers nothing, as a machine that hangs.
func (c *Handle) Pause(ctx context.Context) error {
	c.disturbed.Store(true)
	if _, err := c.docker.ContainerPause(ctx, c.id, client.ContainerPauseOptions{}); err != nil {
		return infra("pause "+c.role, err)
	}
	return nil
}

// Unpause thaws a paused container.
func (c *Handle) Unpause(ctx context.Context) error {
	c.disturbed.Store(true)
	if _, err := c.docker.ContainerUnpause(ctx, c.id, client.ContainerUnpauseOptions{}); err != nil {
		return infra("unpause "+c.role, err)
	}
	return nil
}

// Exec runs cmd in the container and returns its exit status and what it
// printed (stdout then stderr).
func (c *Handle) Exec(ctx context.Context, cmd ...string) (int, string, error) {
	r, err := c.exec(ctx, cmd)
	if err != nil {
		return 0, "", err
	}
	return r.exit, r.stdout + r.stderr, nil
}

// ran is what a command printed and how it ended.
type ran struct {
	stdout, stderr string
	// output is stdout and stderr as the reader sees them: interleaved
	// as written from a container's logs, stdout then stderr from an
	// exec.
	output string
	exit   int
}

// execFor is exec bounded by timeout. A command still running at the
// timeout is left running: the engine has no way to stop an exec's
// process short of stopping its container.
func (c *Handle) execFor(parent context.Context, timeout time.Duration, cmd []string) (ran, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	r, err := c.exec(ctx, cmd)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return ran{}, fmt.Errorf("run %s in %s: still running after %s", cmd[0], c.role, timeout)
	}
	return r, err
}

func (c *Handle) exec(ctx context.Context, cmd []string) (ran, error) {
	ex, err := c.docker.ExecCreate(ctx, c.id, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return ran{}, infra("exec in "+c.role, err)
	}
	att, err := c.docker.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return ran{}, infra("exec in "+c.role, err)
	}
	defer att.Close()
	var out, errOut bytes.Buffer
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&out, &errOut, att.Reader)
		copied <- err
	}()
	select {
	case err := <-copied:
		if err != nil {
			return ran{}, infra("read exec output of "+c.role, err)
		}
	case <-ctx.Done():
		att.Close()
		<-copied
		return ran{}, fmt.Errorf("exec in %s: %w", c.role, ctx.Err())
	}
	// The output ends when the process does; its status follows shortly.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := c.docker.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return ran{}, infra("inspect exec in "+c.role, err)
		}
		if !res.Running {
			return ran{stdout: out.String(), stderr: errOut.String(), output: out.String() + errOut.String(), exit: res.ExitCode}, nil
		}
		select {
		case <-ctx.Done():
			return ran{}, fmt.Errorf("exec in %s: %w", c.role, ctx.Err())
		case <-tick.C:
		}
	}
}

// Networks lists the Docker networks the container is attached to, each
// with the aliases it is reached by there.
func (c *Handle) Networks(ctx context.Context) (map[string][]string, error) {
	res, err := c.docker.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, infra("inspect "+c.role, err)
	}
	out := map[string][]string{}
	if res.Container.NetworkSettings != nil {
		for name, ep := range res.Container.NetworkSettings.Networks {
			if ep != nil {
				out[name] = slices.Clone(ep.Aliases)
			}
		}
	}
	return out, nil
}

// Disconnect takes the container off a Docker network: nothing on it
// reaches the container any more, nor it them.
func (c *Handle) Disconnect(ctx context.Context, net string) error {
	c.disturbed.Store(true)
	if _, err := c.docker.NetworkDisconnect(ctx, net, client.NetworkDisconnectOptions{Container: c.id, Force: true}); err != nil {
		return infra("disconnect "+c.role+" from "+net, err)
	}
	return nil
}

// Connect attaches the container to a Docker network under aliases.
func (c *Handle) Connect(ctx context.Context, net string, aliases []string) error {
	c.disturbed.Store(true)
	if _, err := c.docker.NetworkConnect(ctx, net, client.NetworkConnectOptions{
		Container: c.id, EndpointConfig: &network.EndpointSettings{Aliases: aliases},
	}); err != nil {
		return infra("connect "+c.role+" to "+net, err)
	}
	return nil
}
