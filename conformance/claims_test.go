package conformance

import (
	"strings"
	"testing"
)

const twoImplementations = `
implementations:
  - {name: go, language: go, driver: example.com/driver, claims: [connection, events, tools, provisioning]}
  - {name: js, language: javascript, sdk: sdk-js, node: sdk-js/driver/main.js, claims: [connection, events]}
`

func row(name, lang, conn, events, tools, prov string) map[string]string {
	return map[string]string{"implementation": name, "language": lang, "connection": conn, "events": events, "tools": tools, "provisioning": prov}
}

func TestCheckTable(t *testing.T) {
	r, err := Parse([]byte(twoImplementations))
	if err != nil {
		t.Fatal(err)
	}
	good := []map[string]string{
		row("go", "go", Claimed, Claimed, Claimed, Claimed),
		row("js", "javascript", Claimed, Claimed, NotClaimed, NotClaimed),
	}
	if p := r.CheckTable(good); len(p) != 0 {
		t.Fatalf("expected the registry's own table to pass, got %v", p)
	}
	noTools := row("js", "javascript", Claimed, Claimed, NotClaimed, NotClaimed)
	delete(noTools, "tools")
	for name, c := range map[string]struct {
		rows []map[string]string
		want string
	}{
		"a claim denied":     {[]map[string]string{good[0], row("js", "javascript", Claimed, NotClaimed, NotClaimed, NotClaimed)}, "js: expected events not claimed"},
		"a claim invented":   {[]map[string]string{good[0], row("js", "javascript", Claimed, Claimed, Claimed, NotClaimed)}, "js: expected tools claimed"},
		"another language":   {[]map[string]string{good[0], row("js", "typescript", Claimed, Claimed, NotClaimed, NotClaimed)}, "expected language typescript"},
		"a row missing":      {good[:1], "js: in the registry, not in the table"},
		"a stranger":         {append(good, row("cobol", "cobol", Claimed, NotClaimed, NotClaimed, NotClaimed)), "cobol: not in the registry"},
		"a column missing":   {[]map[string]string{good[0], noTools}, "js: the table has no column tools"},
		"a cell unreadable":  {[]map[string]string{good[0], row("js", "javascript", Claimed, "yes", NotClaimed, NotClaimed)}, `events is "yes"`},
		"a row listed twice": {append(good, good[1]), "js listed twice"},
	} {
		p := r.CheckTable(c.rows)
		if len(p) != 1 || !strings.Contains(p[0], c.want) {
			t.Errorf("%s: expected one problem saying %q, got %v", name, c.want, p)
		}
	}
}

func TestCheckCoverage(t *testing.T) {
	r, err := Parse([]byte(twoImplementations))
	if err != nil {
		t.Fatal(err)
	}
	all := []Checked{
		{Tags: []string{"@conformance"}},
		{Tags: []string{"@connection"}, Implementation: "go"},
		{Tags: []string{"@connection"}, Implementation: "js"},
		{Tags: []string{"@events", "@transient"}, Implementation: "go"},
		{Tags: []string{"@events"}, Implementation: "js"},
		{Tags: []string{"@tools", "@durability"}, Implementation: "go"},
		{Tags: []string{"@provisioning"}, Implementation: "go"},
	}
	if p := r.CheckCoverage(all); len(p) != 0 {
		t.Fatalf("expected every claim checked and nothing else, got %v", p)
	}
	p := r.CheckCoverage(append(all[:4:4], Checked{Tags: []string{"@tools"}, Implementation: "js"}, all[5], all[6]))
	if len(p) != 2 || !strings.Contains(p[0], "js claims events, no scenario tagged @events checks it") ||
		!strings.Contains(p[1], "a scenario tagged @tools checks js, which does not claim it") {
		t.Fatalf("expected an unchecked claim and a check of no claim, got %v", p)
	}
	if p := r.CheckCoverage(append(all, Checked{Tags: []string{"@events"}, Implementation: "cobol"})); len(p) != 1 || !strings.Contains(p[0], "checks cobol") {
		t.Fatalf("expected a check of an implementation the registry lacks refused, got %v", p)
	}
}
