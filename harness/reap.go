package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-multierror"
	"github.com/moby/moby/client"
)

// ownerLabels are the labels naming run id as this process's: its pid,
// the pid's start time (so a recycled pid does not keep a dead run's
// leftovers alive) and the host (so a run on another host sharing the
// engine is never judged by this host's process table).
func ownerLabels(id string) map[string]string {
	pid := os.Getpid()
	labels := map[string]string{
		LabelHarness: "1",
		LabelRun:     id,
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

// ownerAlive reports whether the run that put labels on something is
// still running: its host is another (so this host cannot tell, and
// assumes it is), or its process is there with the same start time.
func ownerAlive(labels map[string]string) bool {
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

// reap removes the containers and networks of runs whose process is gone.
func (s *Session) reap(ctx context.Context) error {
	filter := make(client.Filters).Add("label", LabelHarness+"=1")
	cs, err := s.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return infra("list leftover containers", err)
	}
	ns, err := s.docker.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		return infra("list leftover networks", err)
	}
	var dead []string
	for _, c := range cs.Items {
		if !ownerAlive(c.Labels) && !slices.Contains(dead, c.Labels[LabelRun]) {
			dead = append(dead, c.Labels[LabelRun])
		}
	}
	for _, n := range ns.Items {
		if !ownerAlive(n.Labels) && !slices.Contains(dead, n.Labels[LabelRun]) {
			dead = append(dead, n.Labels[LabelRun])
		}
	}
	var result *multierror.Error
	for _, run := range dead {
		if run == "" || kept(run) {
			continue
		}
		if err := removeLabelled(ctx, s.docker, LabelRun+"="+run); err != nil {
			result = multierror.Append(result, err)
			continue
		}
		if err := removeTempWork(run); err != nil {
			result = multierror.Append(result, err)
		}
		s.narrate("removed the leftovers of dead run %s", run)
	}
	if err := result.ErrorOrNil(); err != nil {
		return infra("reap dead runs", err)
	}
	return nil
}

// removeTempWork removes the temporary work directories a dead run made
// for itself (NewSession without a WorkDir): its state, JetStream store
// and descriptions. A WorkDir given by a caller is the caller's to keep.
func removeTempWork(run string) error {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "mesh-"+run+"-*"))
	if err != nil {
		return fmt.Errorf("find work dirs of run %s: %w", run, err)
	}
	var result *multierror.Error
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			result = multierror.Append(result, fmt.Errorf("remove work dir of run %s: %w", run, err))
		}
	}
	return result.ErrorOrNil()
}

// removeLabelled force-removes every container, then every network,
// carrying label (key=value). It attempts all and returns every failure;
// something already gone is not a failure.
func removeLabelled(ctx context.Context, docker *client.Client, label string) error {
	filter := make(client.Filters).Add("label", label)
	var result *multierror.Error
	cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		result = multierror.Append(result, fmt.Errorf("list containers labelled %s: %w", label, err))
	}
	for _, c := range cs.Items {
		_, err := docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			result = multierror.Append(result, fmt.Errorf("remove container %s: %w", shortID(c.ID), err))
		}
	}
	ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		result = multierror.Append(result, fmt.Errorf("list networks labelled %s: %w", label, err))
	}
	for _, n := range ns.Items {
		_, err := docker.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		if err != nil && !cerrdefs.IsNotFound(err) {
			result = multierror.Append(result, fmt.Errorf("remove network %s: %w", n.Name, err))
		}
	}
	return result.ErrorOrNil()
}

// shortID is the 12-digit form of a container id that docker ps shows.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
