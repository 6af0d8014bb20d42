package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
)

// followEvery is how often cutover reads the record it follows.
const followEvery = 500 * time.Millisecond

// noDriverAfter is how long cutover follows a record that does not change
// before it says no running controller may be driving it.
const noDriverAfter = 30 * time.Second

// cutoverCmd begins the mesh's move to the NATS server adopted beside its
// broker, or joins the one in progress, and follows it: the running
// controller drives it (docs/decisions/0013-cutover.md); this command
// records it and says what happens.
func cutoverCmd() command {
	return command{needsMesh: true,
		flags: func(fs *flag.FlagSet, c *call) {
			fs.DurationVar(&c.within, "within", rollout.DefaultCutoverWithin,
				"how long prepare waits for every node to prove it reaches NATS before the cutover stops, and after how long switch names a node not heard on NATS overdue")
			fs.DurationVar(&c.wait, "wait", 30*time.Minute, "how long to follow the cutover until it ends (0: record or join it and return); the running controller goes on either way")
			fs.BoolVar(&c.asJSON, "json", false, "print the cutover's record as JSON when it ends (or when --wait is over), not its phases as lines")
		},
		check: func(c *call) error {
			if c.within <= 0 {
				return fmt.Errorf("--within %v must be above 0", c.within)
			}
			if c.wait < 0 {
				return fmt.Errorf("--wait %v must not be negative", c.wait)
			}
			return nil
		},
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			cut, joined, err := rollout.BeginCutover(ctx, m, st, c.stateDir, c.options(), rollout.CutoverOptions{Within: c.within})
			if err != nil {
				return err
			}
			if !c.asJSON {
				verb := "begun"
				if joined {
					verb = "in progress: joined"
				}
				fmt.Fprintf(c.stdout, "cutover %d from %s to %s %s; the running controller drives it\n", cut.Generation, cut.From, cut.To, verb)
			}
			cut, err = followCutover(ctx, st, cut, c.wait, c.asJSON, c.stdout)
			if c.asJSON {
				if perr := printJSON(c.stdout, cut); perr != nil {
					return errors.Join(err, perr)
				}
			}
			return err
		}}
}

// followCutover reads the record until the cutover ends or wait is over,
// printing each phase and each change of what blocks it (unless quiet).
// A cutover stopped is an error naming why; one still going when wait is
// over is too, saying where it stands.
func followCutover(ctx context.Context, st store.Reader, cut store.Cutover, wait time.Duration, quiet bool, w io.Writer) (store.Cutover, error) {
	say := func(format string, args ...any) {
		if !quiet {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
	deadline := time.Now().Add(wait)
	lastChange, hinted := time.Now(), false
	shown := store.Cutover{}
	for {
		if cut.Phase != shown.Phase || cut.Generation != shown.Generation {
			say("  %s: %s", cut.PhaseSince.UTC().Format(time.RFC3339), phaseLine(cut))
			lastChange, hinted = time.Now(), false
		}
		if cut.Blocked != shown.Blocked && cut.Blocked != "" {
			say("  waiting: %s", esc(cut.Blocked))
			lastChange = time.Now()
		}
		shown = cut
		switch cut.Phase {
		case store.CutoverDone:
			say("cutover %d done: the mesh is on %s, nothing of it left on %s (%s)", cut.Generation, cut.To, cut.From, cut.Ended.Sub(cut.Begun).Round(time.Millisecond))
			persons, err := rollout.PersonsToIssueAgain(ctx, st, cut)
			if err != nil {
				return cut, err
			}
			if !quiet {
				printIssueAgain(w, cut, persons)
			}
			return cut, nil
		case store.CutoverStopped:
			return cut, fmt.Errorf("%w: cutover %d stopped, the mesh stays on %s: %s", rollout.ErrCutover, cut.Generation, cut.From, cut.Stopped)
		}
		if !time.Now().Before(deadline) {
			if wait == 0 {
				return cut, nil
			}
			return cut, fmt.Errorf("cutover %d still in phase %s after --wait %s; the running controller goes on with it (mesh-controller status follows it)", cut.Generation, cut.Phase, wait)
		}
		if !hinted && time.Since(lastChange) > noDriverAfter {
			say("  no change in %s: a cutover moves only while mesh-controller run is running", noDriverAfter)
			hinted = true
		}
		select {
		case <-ctx.Done():
			return cut, fmt.Errorf("stopped following cutover %d in phase %s; the running controller goes on with it: %w", cut.Generation, cut.Phase, ctx.Err())
		case <-time.After(min(followEvery, time.Until(deadline))):
		}
		next, err := st.Cutover(ctx)
		if err != nil {
			return cut, err
		}
		cut = next
	}
}

// phaseLine says what the phase of a cutover means.
func phaseLine(c store.Cutover) string {
	switch c.Phase {
	case store.CutoverCompose:
		return fmt.Sprintf("compose: every principal's account checked on %s's server (%s), its streams and consumers asserted", c.To, esc(c.Target.Addr))
	case store.CutoverPrepare:
		return fmt.Sprintf("prepare: every node proves it reaches %s with its new credential, nothing moved (bound %s)", c.To, c.Within)
	case store.CutoverSwitch:
		return fmt.Sprintf("switch: every credential names %s; every node is declared to move, the controller listens on both buses", c.To)
	case store.CutoverRetire:
		return fmt.Sprintf("retire: every node heard on %s; the mesh's side of %s is being removed", c.To, c.From)
	case store.CutoverDone:
		return "done"
	case store.CutoverStopped:
		return "stopped: " + esc(c.Stopped)
	}
	return string(c.Phase)
}

// printCutover says where the last cutover stands, a line for it and one
// per node.
func printCutover(w io.Writer, c store.Cutover, issueAgain []store.Person) {
	fmt.Fprintf(w, "cutover %d from %s to %s, begun %s: %s, since %s\n", c.Generation, c.From, c.To,
		c.Begun.UTC().Format(time.RFC3339), phaseLine(c), c.PhaseSince.UTC().Format(time.RFC3339))
	if c.Blocked != "" {
		fmt.Fprintf(w, "  waiting: %s\n", esc(c.Blocked))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Nodes)) {
		fmt.Fprintf(w, "  %s: %s\n", esc(name), cutoverNodeLine(c, c.Nodes[name]))
	}
	printIssueAgain(w, c, issueAgain)
}

// printIssueAgain names each person whose credential, sealed to it before
// the switch, names the bus the mesh left, with the command that issues
// it again.
func printIssueAgain(w io.Writer, c store.Cutover, persons []store.Person) {
	for _, p := range persons {
		fmt.Fprintf(w, "  person %s holds a credential for %s (issued %s): issue it again: %s\n",
			esc(p.Name), c.From, p.Issued.UTC().Format(time.RFC3339), esc(rollout.IssueAgainCommand(p)))
	}
}

// cutoverNodeLine says one node's part: what it was asked and what it did.
func cutoverNodeLine(c store.Cutover, n store.CutoverNode) string {
	var parts []string
	switch {
	case n.Refused != "":
		parts = append(parts, "refused to move: "+esc(n.Refused))
	case !n.Prepared.IsZero():
		parts = append(parts, "reached "+c.To+" at "+n.Prepared.UTC().Format(time.RFC3339))
	case n.Prepare != 0 && c.Phase == store.CutoverPrepare:
		parts = append(parts, fmt.Sprintf("asked to prove it reaches %s (revision %d), not heard yet", c.To, n.Prepare))
	}
	switch {
	case !n.Switched.IsZero() && !c.Committed.IsZero():
		parts = append(parts, fmt.Sprintf("on %s since %s, %s after the switch", c.To, n.Switched.UTC().Format(time.RFC3339), n.Switched.Sub(c.Committed).Round(time.Millisecond)))
	case !n.Switched.IsZero():
		parts = append(parts, "on "+c.To+" since "+n.Switched.UTC().Format(time.RFC3339))
	case n.Switch != 0:
		parts = append(parts, fmt.Sprintf("declared to switch (revision %d), not heard on %s yet", n.Switch, c.To))
	}
	if len(parts) == 0 {
		return "not asked yet"
	}
	return strings.Join(parts, "; ")
}
