package beds

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ScreenshotEnv names where TestTheSpecPageInABrowser writes its screenshot; by default the
// system's temporary directory, and the test says where.
const ScreenshotEnv = "BED_SPEC_SCREENSHOT"

// chromium finds a Chromium to drive, or says why the browser test cannot run.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (Debian: apt-get install chromium): the page is not checked in a browser here")
	return ""
}

// The page of a small run, in headless Chromium: it loads with no console error and no
// network request, the tag filter hides what it should, search finds a step, a failed
// scenario's evidence opens, and a screenshot is written for a person to look at.
func TestTheSpecPageInABrowser(t *testing.T) {
	exe := chromium(t)
	report := t.TempDir()
	history := filepath.Join(t.TempDir(), "history.json")
	for range 2 {
		if _, _, err := run(t, map[string]string{"toy.feature": specToy}, Options{Beds: []Bed{toyBed("toy", 1)}, ReportDir: report, History: history}); err != nil {
			t.Fatal(err)
		}
	}
	page := "file://" + filepath.Join(report, SpecPageFile)

	ctx, heard := browse(t, exe)
	visible := `document.querySelectorAll('details.scenario:not(.hidden)').length`
	choose := func(tag string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const t = document.getElementById('tag'); t.value = %q; t.dispatchEvent(new Event('change')); })()`, tag))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#search`))); err != nil {
		t.Fatalf("load the page: %v", err)
	}
	title := value(t, ctx, chromedp.Title())
	all := value(t, ctx, chromedp.Evaluate[int](visible))

	// The tag filter, as a reviewer uses it: the select, then a change.
	if err := chromedp.Do(ctx, choose("@floor")); err != nil {
		t.Fatal(err)
	}
	byTag := value(t, ctx, chromedp.Evaluate[int](visible))
	byTagName := value(t, ctx, chromedp.Text(chromedp.CSS(`details.scenario:not(.hidden) .name`)))
	if err := chromedp.Do(ctx, choose("")); err != nil {
		t.Fatal(err)
	}

	// Search finds a step's text, typed.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#search`), "reload is measured")); err != nil {
		t.Fatal(err)
	}
	bySearch := value(t, ctx, chromedp.Evaluate[int](visible))
	bySearchName := value(t, ctx, chromedp.Text(chromedp.CSS(`details.scenario:not(.hidden) .name`)))
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](
		`(() => { const s = document.getElementById('search'); s.value = ''; s.dispatchEvent(new Event('input')); })()`)); err != nil {
		t.Fatal(err)
	}

	// The failed scenario is open; its evidence opens on a click.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`details.scenario.failed details.log > summary`))); err != nil {
		t.Fatal(err)
	}
	evidenceOpen := value(t, ctx, chromedp.Evaluate[bool](`document.querySelector('details.scenario.failed details.log').open`))
	evidence := value(t, ctx, chromedp.Text(chromedp.CSS(`details.scenario.failed details.log pre`)))

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := os.Getenv(ScreenshotEnv)
	if path == "" {
		path = filepath.Join(os.TempDir(), "bedrun-spec-page.png")
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the page: %s (%d bytes)", path, len(shot))

	if title != "The mesh's beds: the living specification" {
		t.Errorf("title: expected the page's, got %q", title)
	}
	if all != 3 || byTag != 1 || byTagName != "it passes" {
		t.Errorf("tag @floor: expected 1 of 3 scenarios shown (it passes), got %d of %d (%q)", byTag, all, byTagName)
	}
	if bySearch != 1 || bySearchName != "it passes" {
		t.Errorf("search for a step: expected the one scenario with it, got %d (%q)", bySearch, bySearchName)
	}
	if !evidenceOpen || !strings.Contains(evidence, "server said <no>") {
		t.Errorf("the failed scenario's evidence: expected it open with the log, got open=%v %q", evidenceOpen, evidence)
	}
	quiet(t, heard, page)
}

// heard is what a page said and asked for while it was driven.
type heard struct {
	mu                 sync.Mutex
	problems, requests []string
}

// browse starts headless Chromium at exe for the test and listens to its tab.
func browse(t *testing.T, exe string) (context.Context, *heard) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1280, 1600))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancelTimeout)
	// The browser starts with the first action; the listener needs a tab.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", exe, err)
	}
	h := &heard{}
	if err := chromedp.Listen(ctx, func(ev any) {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				h.problems = append(h.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			h.problems = append(h.problems, "exception: "+ev.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				h.problems = append(h.problems, fmt.Sprintf("%s %s: %s", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text))
			}
		case *network.EventRequestWillBeSent:
			h.requests = append(h.requests, ev.Request.URL)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return ctx, h
}

// quiet fails the test for anything the page logged and any request but page's own.
func quiet(t *testing.T, h *heard, page string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.problems {
		t.Errorf("the page logged: %s", p)
	}
	for _, u := range h.requests {
		if u != page {
			t.Errorf("the page asked for %s: it must fetch nothing", u)
		}
	}
}

// SpecPageEnv names a page of a whole run (bedrun all --report DIR: DIR/index.html) for
// TestAFullRunsPageInABrowser to load and time; .ci/run gives it the beds' own.
const SpecPageEnv = "BED_SPEC_PAGE"

// A whole run's page loads in Chromium with nothing logged or fetched; how large it is and
// how long it takes to load is logged. Skipped unless SpecPageEnv names a page.
func TestAFullRunsPageInABrowser(t *testing.T) {
	path := os.Getenv(SpecPageEnv)
	if path == "" {
		t.Skipf("no page of a whole run given: %s=DIR/index.html (of bedrun all --report DIR) loads and times it", SpecPageEnv)
	}
	exe := chromium(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	page := "file://" + abs
	ctx, heard := browse(t, exe)
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#search`))); err != nil {
		t.Fatalf("load the page: %v", err)
	}
	loaded := value(t, ctx, chromedp.Evaluate[float64](`(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()`))
	scenarios := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('details.scenario').length`))
	shown := value(t, ctx, chromedp.Text(chromedp.CSS(`#shown`)))
	t.Logf("page %s: %d bytes, %d scenarios (%s), loaded in %.0f ms", path, fi.Size(), scenarios, shown, loaded)
	if scenarios == 0 || !strings.HasPrefix(shown, fmt.Sprintf("%d of %d", scenarios, scenarios)) {
		t.Errorf("expected every scenario on the page shown at first, run or not; got %d, %q", scenarios, shown)
	}
	if dir := os.Getenv(ScreenshotEnv); dir != "" {
		shot := value(t, ctx, chromedp.CaptureScreenshot())
		path := filepath.Join(filepath.Dir(dir), "bedrun-spec-page-run.png")
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the run's page: %s", path)
	}
	quiet(t, heard, page)
}

// value runs a and returns its value, failing the test on its error.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("in the browser: %v", err)
	}
	return v
}
