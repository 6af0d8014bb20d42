package beds

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/meshbus/mesh/mesh/atomicfile"
)

// HistoryFile is the copy of the run's history (Options.History) beside its page, from which
// `bedrun report` draws the trends again.
const HistoryFile = "history.json"

// HistoryKept is how many runs a history keeps, the newest; the page's trends show them.
const HistoryKept = 30

// History is the runs of the beds one after another (Options.History): each bed's and each
// scenario's verdict and time, so that a flaky or slowing scenario shows itself on the page.
type History struct {
	Runs []HistoryRun `json:"runs"`
}

// HistoryRun is one run as the history keeps it.
type HistoryRun struct {
	Started   time.Time      `json:"started"`
	Seconds   float64        `json:"seconds"`
	Status    string         `json:"status"`
	Beds      []HistoryEntry `json:"beds"`
	Scenarios []HistoryEntry `json:"scenarios"`
}

// HistoryEntry is a bed's or a scenario's verdict and time in one run. A scenario is known
// by its bed and its title (an outline's row with its values), which survive edits around
// it in its file; Where is where it was then.
type HistoryEntry struct {
	Bed     string  `json:"bed"`
	Name    string  `json:"name,omitempty"`
	Where   string  `json:"where,omitempty"`
	Status  string  `json:"status"`
	Seconds float64 `json:"seconds"`
}

// readHistory reads the history at path; none there is an empty one. A file that is not a
// history is an error: appending would lose what it holds.
func readHistory(path string) (History, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return History{}, nil
	}
	if err != nil {
		return History{}, fmt.Errorf("read history: %w", err)
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return History{}, fmt.Errorf("read history %s: not a history of the beds (%w); move it away or name another file", path, err)
	}
	return h, nil
}

// appendHistory adds r to the history at path, keeping the newest HistoryKept runs, and
// returns it. The file is replaced whole (atomicfile): a run killed while writing it leaves
// the history as it was.
func appendHistory(path string, r Result) (History, error) {
	h, err := readHistory(path)
	if err != nil {
		return History{}, err
	}
	run := HistoryRun{Started: r.Started, Seconds: r.Elapsed.Seconds(), Status: runStatus(r)}
	for _, b := range r.Beds {
		run.Beds = append(run.Beds, HistoryEntry{Bed: b.Bed.Name, Status: bedStatus(b), Seconds: b.Elapsed.Seconds()})
		for _, s := range b.Scenarios {
			run.Scenarios = append(run.Scenarios, HistoryEntry{Bed: b.Bed.Name, Name: s.Title(), Where: s.Where(),
				Status: s.Status.String(), Seconds: s.Elapsed.Seconds()})
		}
	}
	h.Runs = append(h.Runs, run)
	if n := len(h.Runs); n > HistoryKept {
		h.Runs = h.Runs[n-HistoryKept:]
	}
	if err := writeHistory(path, h); err != nil {
		return History{}, err
	}
	return h, nil
}

func writeHistory(path string, h History) error {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
	}
	if _, err := atomicfile.Write(path, append(b, '\n'), 0o644, atomicfile.SyncDir); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// trend is what the history says of one bed (name "") or scenario, oldest first, each with
// its run's start.
func (h History) trend(bed, name string) ([]HistoryEntry, []time.Time) {
	var out []HistoryEntry
	var when []time.Time
	for _, run := range h.Runs {
		entries := run.Scenarios
		if name == "" {
			entries = run.Beds
		}
		for _, e := range entries {
			if e.Bed == bed && e.Name == name {
				out, when = append(out, e), append(when, run.Started)
				break
			}
		}
	}
	return out, when
}
