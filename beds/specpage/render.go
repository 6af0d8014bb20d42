package specpage

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

var (
	//go:embed page.tmpl
	pageTemplate string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"dur":    duration,
	"clock":  clock,
	"status": statusClass,
	"join":   strings.Join,
	"lower":  strings.ToLower,
	"search": searchText,
	"secs":   func(s float64) string { return duration(time.Duration(s * float64(time.Second))) },
	"day":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
}).Parse(pageTemplate))

// Render writes the page of r to w.
func Render(w io.Writer, r Run) error {
	return page.Execute(w, struct {
		Run
		CSS template.CSS
		JS  template.JS
	}{r, template.CSS(pageCSS), template.JS(pageJS)})
}

// duration is d for people: "1m7s", "8.4s", "548ms", "<1ms".
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// clock is a wall-clock time to line up with logs, in UTC to the millisecond.
func clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("15:04:05.000")
}

// statusClass is the CSS class of a status: "not run" becomes "not-run".
func statusClass(s string) string { return strings.ReplaceAll(s, " ", "-") }

// searchText is what the page's search looks in for a scenario: its name, description,
// tags, steps, error and where it is, lower-cased.
func searchText(s Scenario) string {
	parts := []string{s.Name, s.Description, s.Where, s.Error, strings.Join(s.Tags, " ")}
	for _, st := range s.Steps {
		parts = append(parts, st.Keyword+st.Text, st.DocString)
	}
	return strings.ToLower(strings.Join(parts, "\n"))
}

// ScenarioID is a page-unique anchor for the scenario at where in bed.
func ScenarioID(bed, where string) string {
	var b strings.Builder
	for _, r := range fmt.Sprintf("%s-%s", bed, where) {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}
