// Package owner marks what a process creates on the Docker engine as its
// own, and removes what dead processes left behind. Ryuk, testcontainers'
// reaper, cannot be pulled here, so a process that dies before its cleanup
// (a test killed by its timeout, a bed interrupted twice) leaves its
// containers running; the next process to start reaps them. Everything the
// harness, the beds and the container tests create carries Labels.
package owner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-multierror"
	"github.com/moby/moby/client"
)

// Labels on what a process creates. The run id finds what its cleanup
// removes; the pid, its start time and the host find what reaping may
// remove (a run whose process is gone).
const (
	LabelHarness  = "mesh.harness"
	LabelRun      = "mesh.run"
	LabelPID      = "mesh.pid"
	LabelPIDStart = "mesh.pidstart"
	LabelHost     = "mesh.host"
)

// Labels are the labels naming run as this process's: its pid,
// the pid's start time (so a recycled pid does not keep a dead run's
// leftovers alive) and the host (so a run on another host sharing the
// engine is never judged by this host's process table).
func Labels(run string) map[string]string {
	pid := os.Getpid()
	labels := map[string]string{
		LabelHarness: "1",
		LabelRun:     run,
		LabelPID:     strconv.Itoa(pid),
		LabelHost:    hostname(),
	}
	if start, ok := processStart(pid); ok {
		labels[LabelPIDStart] = start
	}
	return labels
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// processStart is the start time of pid in clock ticks since boot (field
// 22 of /proc/<pid>/stat), which tells a process from a later one that
// reuses its pid. ok is false where /proc cannot say.
func processStart(pid int) (start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// count fields from after its closing parenthesis (field 3 on).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(s[i+1:])
	const startField = 22 - 3
	if len(fields) <= startField {
		return "", false
	}
	return fields[startField], true
}

// Alive reports whether the run that put labels on something is
// still running: its host is another (so this host cannot tell, and
// assumes it is), or its process is there with the same start time.
func Alive(labels map[string]string) bool {
	if h := labels[LabelHost]; h != "" && h != hostname() {
		return true
	}
	pid, err := strconv.Atoi(labels[LabelPID])
	if err != nil || pid <= 0 {
		// Not ours to judge: something labelled by hand or by a future
		// version. Leave it.
		return true
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	if want := labels[LabelPIDStart]; want != "" {
		if got, ok := processStart(pid); ok && got != want {
			return false // the pid was recycled by another process
		}
	}
	return true
}

// Claim is what a test that creates containers outside a harness session
// calls first: it reaps what dead processes left (a failure to is returned,
// and the labels are good all the same) and returns the labels for what
// the caller creates, under a fresh run id that begins with who.
func Claim(ctx context.Context, docker *client.Client, who string) (map[string]string, error) {
	_, err := Reap(ctx, docker, nil)
	b := make([]byte, 3)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return Labels(who + "-" + hex.EncodeToString(b)), err
}

// Reap removes the containers and networks of runs whose process is gone,
// except those keep says to keep (nil keeps none). It returns the runs it
// removed whole; a run it could not remove is in the error, to be tried
// again by the next process.
func Reap(ctx context.Context, docker *client.Client, keep func(run string) bool) (removed []string, err error) {
	filter := make(client.Filters).Add("label", LabelHarness+"=1")
	cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return nil, fmt.Errorf("list leftover containers: %w", err)
	}
	ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		return nil, fmt.Errorf("list leftover networks: %w", err)
	}
	var dead []string
	for _, c := range cs.Items {
		if !Alive(c.Labels) && !slices.Contains(dead, c.Labels[LabelRun]) {
			dead = append(dead, c.Labels[LabelRun])
		}
	}
	for _, n := range ns.Items {
		if !Alive(n.Labels) && !slices.Contains(dead, n.Labels[LabelRun]) {
			dead = append(dead, n.Labels[LabelRun])
		}
	}
	var result *multierror.Error
	for _, run := range dead {
		if run == "" || keep != nil && keep(run) {
			continue
		}
		if err := Remove(ctx, docker, LabelRun+"="+run); err != nil {
			result = multierror.Append(result, err)
			continue
		}
		removed = append(removed, run)
	}
	return removed, result.ErrorOrNil()
}

// Remove force-removes every container, then every network,
// carrying label (key=value). It attempts all and returns every failure;
// something already gone is not a failure.
func Remove(ctx context.Context, docker *client.Client, label string) error {
	filter := make(client.Filters).Add("label", label)
	var result *multierror.Error
	cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		result = multierror.Append(result, fmt.Errorf("list containers labelled %s: %w", label, err))
	}
	// At once: a removal is mostly the engine waiting (a kill, an
	// unmount), and a cluster has a handful of containers.
	errs := make([]error, len(cs.Items))
	var wg sync.WaitGroup
	for i, c := range cs.Items {
		wg.Go(func() {
			_, err := docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				errs[i] = fmt.Errorf("remove container %s: %w", shortID(c.ID), err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			result = multierror.Append(result, err)
		}
	}
	ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		result = multierror.Append(result, fmt.Errorf("list networks labelled %s: %w", label, err))
	}
	for _, n := range ns.Items {
		if err := removeNetwork(ctx, docker, n.ID); err != nil {
			result = multierror.Append(result, fmt.Errorf("remove network %s: %w", n.Name, err))
		}
	}
	return result.ErrorOrNil()
}

// networkTries bounds removeNetwork: how many times a network that still
// has something attached is emptied and asked to go again.
const networkTries = 5

// networkSettle is how long removeNetwork waits between tries.
const networkSettle = 200 * time.Millisecond

// removeNetwork removes network id. A network the engine will not remove
// while something is attached to it (a container created after the
// containers were listed) is emptied of what is attached, force-removed
// as the listed containers are, and removed again, a few times: a network
// labelled as the run's holds nothing but the run's. A network that
// reports nothing attached and still "has active endpoints" (seen once
// after a bed's teardown, on a Docker 20.10 engine) is the engine's own
// leak, which only its restart clears: it is reported, as before.
func removeNetwork(ctx context.Context, docker *client.Client, id string) error {
	for try := 1; ; try++ {
		_, err := docker.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		if try == networkTries {
			return err
		}
		res, inspectErr := docker.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		if cerrdefs.IsNotFound(inspectErr) {
			return nil
		}
		if inspectErr != nil {
			return err
		}
		for c := range res.Network.Containers {
			// Already being removed (a conflict) is as good as removed.
			_, rmErr := docker.ContainerRemove(ctx, c, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if rmErr != nil && !cerrdefs.IsNotFound(rmErr) && !cerrdefs.IsConflict(rmErr) {
				return fmt.Errorf("%w; remove container %s attached to it: %w", err, shortID(c), rmErr)
			}
		}
		// An endpoint outlives its container's removal briefly.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(networkSettle):
		}
	}
}

// shortID is the 12-digit form of a container id that docker ps shows.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
