package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// outboxDir holds the reports not yet acknowledged by CONTROL, one file
// each, named so that their names sort in the order they were made.
const outboxDir = "outbox"

// outbox keeps a node's reports on disk until CONTROL holds them: a node
// cut off, or killed, sends them when it can, in order, each with its own
// message id so that one sent twice is kept once.
type outbox struct {
	dir  string
	mu   sync.Mutex
	next uint64
	kick chan struct{}
}

func openOutbox(s State) (*outbox, error) {
	dir := s.path(outboxDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	names, err := pending(dir)
	if err != nil {
		return nil, err
	}
	o := &outbox{dir: dir, kick: make(chan struct{}, 1)}
	if len(names) > 0 {
		var last uint64
		if _, err := fmt.Sscanf(names[len(names)-1], "%020d.json", &last); err == nil {
			o.next = last
		}
	}
	return o, nil
}

// pending are the reports waiting, oldest first; leftovers of writes a
// kill interrupted are removed.
func pending(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".") && strings.Contains(name, atomicfile.TempInfix):
			_ = os.Remove(filepath.Join(dir, name))
		case strings.HasSuffix(name, ".json"):
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// add keeps a report until it is sent.
func (o *outbox) add(r wire.Report) error {
	o.mu.Lock()
	o.next++
	name := fmt.Sprintf("%020d.json", o.next)
	o.mu.Unlock()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := atomicfile.Write(filepath.Join(o.dir, name), b, 0o600, atomicfile.SyncDir); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	select {
	case o.kick <- struct{}{}:
	default:
	}
	return nil
}

// Len is how many reports wait.
func (o *outbox) Len() int {
	names, _ := pending(o.dir)
	return len(names)
}

// send sends every waiting report in order and removes each once CONTROL
// holds it; it stops at the first that is not, to try again later.
func (o *outbox) send(ctx context.Context, bus plane.Reporter) error {
	names, err := pending(o.dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		path := filepath.Join(o.dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		var r wire.Report
		if err := json.Unmarshal(data, &r); err != nil {
			// Not a report of ours: nothing will make it one.
			_ = os.Remove(path)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = bus.Report(pctx, r.Node, r.ID, r.Marshal())
		cancel()
		if err != nil {
			return fmt.Errorf("send report %s: %w", r.ID, err)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	return nil
}
