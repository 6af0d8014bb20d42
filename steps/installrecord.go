package steps

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/controller/status"
)

// The installation's record, compared live between the buses (design 25
// §9 step 4: a converted flow is proved against the behaviour it
// replaced). Each row of @install notes the record status keeps of the
// same installation on its bus; a scenario after the outline compares the
// two. The artifact is a function of the revision and the builder's
// program alone (build.Assemble), so its digest is the same on both.

// installRecord is the record as `status --json` printed it, less when
// the node reported it (the one field two runs cannot share).
type installRecord map[string]any

func (s *scenario) bindInstallRecords(sc *godog.ScenarioContext) {
	sc.Step(`^the installation's record on "([^"]+)" names that build, installed, and is noted as the one the mesh on (\w+) keeps$`, s.theInstallationRecordIsNoted)
	sc.Step(`^the installation's records noted on (\w+) and on (\w+) in this run have the same fields and the same values, the artifact's digest included$`, s.theInstallationRecordsAreAlike)
}

func (s *scenario) theInstallationRecordIsNoted(ctx context.Context, node, bus string) error {
	if on := cmp.Or(s.bus, topology.BusNATS); on != bus {
		return fmt.Errorf("the scenario's mesh is on %s, not on %s", on, bus)
	}
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	in, ok := s.installationOn(st, node, s.bd.build.Module)
	if !ok {
		return fmt.Errorf("status shows no installation of %s on %s", s.bd.build.Module, node)
	}
	want := status.Installation{Node: node, Module: s.bd.build.Module, Repo: s.bd.build.Repo, Revision: s.bd.build.Revision, Artifact: s.bd.build.Digest, Outcome: status.Installed, At: in.At}
	if in != want {
		return fmt.Errorf("expected the record %+v, status shows %+v", want, in)
	}
	rec, err := recordOf(in)
	if err != nil {
		return err
	}
	s.w.noteInstallRecord(bus, rec)
	return nil
}

func (s *scenario) theInstallationRecordsAreAlike(ctx context.Context, a, b string) error {
	ra, err := s.w.installRecord(ctx, a)
	if err != nil {
		return err
	}
	rb, err := s.w.installRecord(ctx, b)
	if err != nil {
		return err
	}
	if ka, kb := slices.Sorted(maps.Keys(ra)), slices.Sorted(maps.Keys(rb)); !slices.Equal(ka, kb) {
		return fmt.Errorf("the record on %s has the fields %v, on %s %v", a, ka, b, kb)
	}
	for _, k := range slices.Sorted(maps.Keys(ra)) {
		if ra[k] != rb[k] {
			return fmt.Errorf("the record's %s is %v on %s, %v on %s", k, ra[k], a, rb[k], b)
		}
	}
	return nil
}

// recordOf is the record's fields as status --json spells them, but for
// its time.
func recordOf(in status.Installation) (installRecord, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var rec installRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	delete(rec, "at")
	return rec, nil
}

func (w *World) noteInstallRecord(bus string, rec installRecord) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.installRecords == nil {
		w.installRecords = map[string]installRecord{}
	}
	w.installRecords[bus] = rec
	close(w.noted)
	w.noted = make(chan struct{})
}

// installWait bounds the wait for the rows of @install still running (or
// not yet started) when the comparison starts: a row takes about a minute.
const installWait = 5 * time.Minute

// installRecord is the record the row on bus noted, or why there is none:
// the comparison is of two rows of one run, and is not made without both.
// Run in parallel, the rows may still be running when the comparison
// starts: it waits for them while any scenario of @install is unfinished.
func (w *World) installRecord(ctx context.Context, bus string) (installRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, installWait)
	defer cancel()
	for {
		w.mu.Lock()
		rec, ok := w.installRecords[bus]
		noted := w.noted
		w.mu.Unlock()
		switch {
		case ok:
			return rec, nil
		case beds.Unfinished(ctx, "@install") == 0:
			return nil, fmt.Errorf("no installation's record was noted on %s in this run: its row of @install did not run or did not get that far (run the rows and this scenario together, e.g. bedrun living --run install)", bus)
		}
		select {
		case <-noted:
		case <-time.After(time.Second): // a row may end without noting
		case <-ctx.Done():
			return nil, fmt.Errorf("no installation's record was noted on %s within %s: %d scenarios of @install still unfinished", bus, installWait, beds.Unfinished(ctx, "@install"))
		}
	}
}
