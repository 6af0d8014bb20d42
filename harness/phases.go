package harness

import (
	"fmt"
	"strings"
	"time"
)

// phases times the phases of a long operation for its narration:
// "raised genesis cluster run=ab12: networks 0.1s, genesis 1.3s …".
type phases struct {
	title string
	start time.Time
	last  time.Time
	parts []string
}

func newPhases(title string) *phases {
	now := time.Now()
	return &phases{title: title, start: now, last: now}
}

// done records that the phase name ended now.
func (p *phases) done(name string) {
	now := time.Now()
	p.parts = append(p.parts, fmt.Sprintf("%s %.1fs", name, now.Sub(p.last).Seconds()))
	p.last = now
}

// summary is the line for a finished operation.
func (p *phases) summary() string {
	return fmt.Sprintf("raised %s: %s (total %.1fs)", p.title, strings.Join(p.parts, ", "), time.Since(p.start).Seconds())
}

// failed is the line for an operation that failed in phase name.
func (p *phases) failed(name string) string {
	parts := append(append([]string(nil), p.parts...), fmt.Sprintf("%s FAILED after %.1fs", name, time.Since(p.last).Seconds()))
	return fmt.Sprintf("could not raise %s: %s", p.title, strings.Join(parts, ", "))
}
