package beds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const specToy = `Feature: The toy's specification
  What the toy promises, in prose a reviewer reads.

  @floor
  Scenario: it passes
    A passing scenario's own prose.
    Given a mesh
    When the reload is measured
    Then all is well

  @bad
  Scenario: it fails
    Given a mesh
    And it keeps "server said <no>" as evidence
    Then it fails with "expected 3 streams, got 2"
    And all is well

  @bad @undefined
  Scenario: it is undefined
    Given a mesh
    Then nobody defined this step
`

// The page shows each bed's feature prose, every scenario with its description, tags,
// steps and their results, the measurements beside the scenario that took them, and a
// failed scenario's evidence inline; it names nothing outside itself.
func TestTheSpecPageShowsTheRunAsTheSpecification(t *testing.T) {
	report := t.TempDir()
	if _, _, err := run(t, map[string]string{"toy.feature": specToy}, Options{Beds: []Bed{toyBed("toy", 1)}, ReportDir: report}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(report, SpecPageFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		"Step 1 · toy",
		"The toy&#39;s specification",
		"What the toy promises, in prose a reviewer reads.",
		"A passing scenario&#39;s own prose.",
		`data-tags="@floor"`,
		`<span class="kw">When</span>the reload is measured`,
		"<th>reload latency</th><td>812ms</td>",
		"expected 3 streams, got 2",
		"bedrun toy --run &#39;^it fails$&#39;",
		"server said &lt;no&gt;",
		`class="badge undefined">undefined`,
		"toy.feature#L12",
		"Content-Security-Policy",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("expected the page to contain %q", want)
		}
	}
	for _, never := range []string{"http://", "https://", "src=", "<link"} {
		if strings.Contains(page, never) {
			t.Errorf("the page names something outside itself: %q", never)
		}
	}
}
