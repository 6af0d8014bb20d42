package beds

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Console is a progress output the runner shares with the steps: what the steps write to it
// (the harness's narration) comes out as whole lines indented under the step in progress,
// never through the middle of the runner's own, e.g. a running step's line on a terminal.
// Pass it as Options.Out and to the steps.
type Console struct {
	p     *printer
	lines lines
}

// NewConsole returns a Console writing to w; color is as Options.Color.
func NewConsole(w io.Writer, color bool) *Console {
	c := &Console{p: &printer{out: w, color: color}}
	c.lines.each = func(line string) {
		if line == "" {
			c.p.println("")
		} else {
			c.p.note(line)
		}
	}
	return c
}

// Write prints each complete line of b as narration; a line's end may come in a later Write.
func (c *Console) Write(b []byte) (int, error) { return c.lines.Write(b) }

// lines is a writer that hands each complete line written to it, without its line end, to
// each; a line's end may come in a later Write.
type lines struct {
	each    func(line string)
	mu      sync.Mutex
	partial []byte
}

func (w *lines) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.each(strings.TrimRight(string(w.partial[:i]), "\r"))
		w.partial = w.partial[i+1:]
	}
}

// printer writes the live progress: one line per scenario, step, measurement and narration,
// and a summary per bed. On a terminal (color) a running step shows as a line that its
// verdict overwrites; elsewhere only verdicts are printed, so logs stay clean.
type printer struct {
	mu    sync.Mutex // the steps may write (Console) from their own goroutines
	out   io.Writer
	color bool
	// open is the running step's line, shown on a terminal until the step ends.
	open string
	// quiet is the running step's text elsewhere: printed only if the step narrates, so its
	// notes do not read as the previous step's.
	quiet string
	// buffered: the lines are kept for later (a scenario run in parallel), so a running step
	// is never drawn as a line to overwrite.
	buffered bool
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
	clearLine  = "\r\x1b[K"
)

func (p *printer) paint(code, s string) string {
	if !p.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

// println writes a whole line, first moving a running step's line out of the way.
func (p *printer) println(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quiet != "" {
		fmt.Fprintln(p.out, "  ⋯ "+p.quiet)
		p.quiet = ""
	}
	if p.open != "" {
		fmt.Fprint(p.out, clearLine)
	}
	fmt.Fprintln(p.out, line)
	if p.open != "" {
		fmt.Fprint(p.out, p.open)
	}
}

// running shows a step that has started: on a terminal at once, elsewhere when it first
// narrates.
func (p *printer) running(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.color || p.buffered {
		p.quiet = text
		return
	}
	p.open = p.paint(ansiDim, "  ⋯ "+text)
	fmt.Fprint(p.out, p.open)
}

// done ends the running step's line with its verdict.
func (p *printer) done(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quiet = ""
	if p.open != "" {
		fmt.Fprint(p.out, clearLine)
		p.open = ""
	}
	fmt.Fprintln(p.out, line)
}

// mark is the one-character verdict of a status.
func (p *printer) mark(s Status) string {
	switch s {
	case Passed:
		return p.paint(ansiGreen, "✓")
	case Failed, Errored:
		return p.paint(ansiRed, "✗")
	case Undefined, Pending, Ambiguous:
		return p.paint(ansiYellow, "?")
	case Interrupted:
		return p.paint(ansiYellow, "!")
	}
	return p.paint(ansiDim, "-")
}

// bedStart is a bed's first line; parallel is how many of its scenarios run at once.
func (p *printer) bedStart(b Bed, n, parallel int) {
	at := ""
	if parallel > 1 && n > 1 {
		at = fmt.Sprintf(" · %d at once", min(parallel, n))
	}
	p.println(p.paint(ansiBold, fmt.Sprintf("━━ %s · step %d · %s%s · timeout %s", b.Name, b.Step, plural(n, "scenario"), at, b.Timeout)))
}

// scenarioStart is a scenario's first line; compact leaves out the blank line before it (for
// scenarios running at once, whose lines follow one another).
func (p *printer) scenarioStart(bed string, s *ScenarioResult, featuresDir string, compact bool) {
	if !compact {
		p.println("")
	}
	p.println(fmt.Sprintf("%s %s › %s  %s", p.paint(ansiCyan, "▶"), bed, p.paint(ansiBold, s.Title()),
		p.paint(ansiDim, displayPath(featuresDir, s.Where()))))
}

// phase reports time spent outside steps (hooks) when it is long enough to matter.
func (p *printer) phase(name string, d time.Duration) {
	if d >= 100*time.Millisecond {
		p.println(p.paint(ansiDim, fmt.Sprintf("  · %s (%s)", name, short(d))))
	}
}

func (p *printer) step(r StepResult) {
	line := fmt.Sprintf("  %s %s", p.mark(r.Status), r.Text)
	switch r.Status {
	case Skipped:
		line = p.paint(ansiDim, "  - "+r.Text+" (skipped)")
	case Undefined:
		line += p.paint(ansiYellow, " (undefined: no step definition matches)")
	case Pending:
		line += p.paint(ansiYellow, " (pending)")
	case Interrupted:
		line += p.paint(ansiYellow, " (interrupted after "+short(r.Elapsed)+")")
	default:
		line += p.paint(ansiDim, " ("+short(r.Elapsed)+")")
	}
	p.done(line)
	if r.Err != nil && (r.Status == Failed || r.Status == Errored || r.Status == Ambiguous) {
		p.detail(r.Err)
	}
}

// detail prints an error under the line it explains, every line of it indented.
func (p *printer) detail(err error) {
	for _, l := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		p.println(p.paint(ansiRed, "      "+l))
	}
}

func (p *printer) note(text string) {
	p.println(p.paint(ansiDim, "    · ") + text)
}

func (p *printer) measured(m Measurement) {
	p.println(fmt.Sprintf("    ⏱ %s = %s", m.Name, p.paint(ansiBold, precise(m.Value))))
}

func (p *printer) scenarioEnd(s *ScenarioResult) {
	word := s.Status.String()
	if s.Status != Passed {
		word = strings.ToUpper(word)
	}
	p.println(fmt.Sprintf("  %s %s in %s", p.mark(s.Status), word, short(s.Elapsed)))
}

// scenarioEndNamed is a scenario's end among others running at once: it names the scenario.
func (p *printer) scenarioEndNamed(bed string, s *ScenarioResult, featuresDir string) {
	word := s.Status.String()
	if s.Status != Passed {
		word = strings.ToUpper(word)
	}
	p.println(fmt.Sprintf("%s %s in %s  %s › %s  %s", p.mark(s.Status), word, short(s.Elapsed), bed,
		p.paint(ansiBold, s.Title()), p.paint(ansiDim, displayPath(featuresDir, s.Where()))))
}

// block prints lines kept back (a scenario's, run in parallel) as they were written.
func (p *printer) block(lines string) {
	for _, l := range strings.Split(strings.TrimRight(lines, "\n"), "\n") {
		p.println(l)
	}
}

// bedEnd is the bed's summary: counts, wall time, what did not pass, what was measured.
func (p *printer) bedEnd(r BedResult, featuresDir string) {
	p.println("")
	c := r.Counts()
	p.println(fmt.Sprintf("%s %s: %s in %s", p.verdict(r.OK(), r.Interrupted()), p.paint(ansiBold, r.Bed.Name), countLine(c), short(r.Elapsed)))
	if r.Err != nil {
		p.detail(r.Err)
	}
	p.timeSpent(r, featuresDir)
	for _, s := range r.Scenarios {
		if s.Status == Passed {
			continue
		}
		line := fmt.Sprintf("  %s %-11s %s  %s", p.mark(s.Status), s.Status, displayPath(featuresDir, s.Where()), s.Title())
		if (s.Status == NotRun || s.Status == Interrupted) && s.Err != nil {
			line += p.paint(ansiDim, " ("+firstLine(s.Err.Error())+")")
		}
		p.println(line)
	}
	for _, s := range r.Scenarios {
		for _, m := range s.Measurements {
			p.println(fmt.Sprintf("  ⏱ %s = %s  %s", m.Name, p.paint(ansiBold, precise(m.Value)), p.paint(ansiDim, "("+s.Title()+")")))
		}
	}
	if r.Bed.Matrix != nil {
		mr := r.Bed.Matrix.tally(r)
		if len(mr.Rows) == 0 {
			p.println(fmt.Sprintf("  by %s: no scenario of this run names one", mr.Param))
		} else {
			p.println(fmt.Sprintf("  by %s:", mr.Param))
			for _, line := range mr.lines() {
				p.println("    " + line)
			}
		}
	}
}

// timeSpent is where the bed's time went, and its slowest scenarios.
func (p *printer) timeSpent(r BedResult, featuresDir string) {
	t := r.Time()
	if t.Scenarios == 0 {
		return
	}
	line := fmt.Sprintf("  time in scenarios %s: raising %s%s, steps %s, teardown %s%s, setup %s",
		short(t.Scenarios), short(t.Raising), clusters(t.Raised, "raised"), short(t.Steps), short(t.Teardown), clusters(t.Reset, "reset and handed on"), short(t.Setup))
	if t.Wall > 0 && t.Scenarios > t.Wall*11/10 {
		line += fmt.Sprintf("; %.1f at once on average", t.Scenarios.Seconds()/t.Wall.Seconds())
	}
	p.println(p.paint(ansiDim, line))
	slow := r.Slowest(3)
	if len(slow) < 2 {
		return
	}
	var parts []string
	for _, s := range slow {
		parts = append(parts, fmt.Sprintf("%s %s", short(s.Elapsed), displayPath(featuresDir, s.Where())))
	}
	p.println(p.paint(ansiDim, "  slowest: "+strings.Join(parts, ", ")))
}

// runEnd sums up a run of several beds, naming the bed that stopped it.
func (p *printer) runEnd(r Result) {
	p.println("")
	line := fmt.Sprintf("%s %s: %s in %s", p.verdict(r.OK(), r.Interrupted()), plural(len(r.Beds), "bed"), countLine(r.Counts()), short(r.Elapsed))
	if b, ok := r.Stopped(); ok {
		line += fmt.Sprintf("; stopped at %s (step %d), not green", b.Bed.Name, b.Bed.Step)
	}
	p.println(line)
}

// verdict is PASS, FAIL, or INTERRUPTED for what is not green only because of an interrupt.
func (p *printer) verdict(ok, interrupted bool) string {
	switch {
	case ok:
		return p.paint(ansiGreen, "PASS")
	case interrupted:
		return p.paint(ansiYellow, "INTERRUPTED")
	}
	return p.paint(ansiRed, "FAIL")
}

// countLine is "5 passed, 1 failed of 6 scenarios", best statuses first.
func countLine(c Counts) string {
	var parts []string
	for _, s := range []Status{Passed, Failed, Errored, Undefined, Pending, Ambiguous, Interrupted, Skipped, NotRun} {
		if c[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[s], s))
		}
	}
	if len(parts) == 0 {
		return "no scenarios"
	}
	return strings.Join(parts, ", ") + " of " + plural(c.Total(), "scenario")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// short renders a duration for a human at a glance: <1ms, 340ms, 12.3s, 2m13s.
func short(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// precise renders a measurement to three significant digits: 865ms, 1.23s, 12.3ms.
func precise(d time.Duration) string {
	unit := time.Duration(1)
	for v := d; v >= 1000 || v <= -1000; v /= 10 {
		unit *= 10
	}
	return d.Round(unit).String()
}

// displayPath shows a feature path as the reader's shell would reach it.
func displayPath(featuresDir, where string) string {
	if featuresDir == "" || featuresDir == "." {
		return where
	}
	return strings.TrimSuffix(featuresDir, "/") + "/" + where
}

// clusters says how many clusters were raised or reset, as a parenthesis; nothing for none.
func clusters(n int, what string) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " (1 cluster " + what + ")"
	}
	return fmt.Sprintf(" (%d clusters %s)", n, what)
}
