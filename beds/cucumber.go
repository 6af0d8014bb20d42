package beds

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The runner writes cucumber.json itself, like junit.xml, from what its hooks saw: godog
// v0.16's cucumber formatter panics at the end of a run stopped by StopOnFailure (it looks up
// a result for every scenario, run or not), losing the whole report exactly when fail-fast
// was asked for.

type cukeFeature struct {
	URI         string        `json:"uri"`
	ID          string        `json:"id"`
	Keyword     string        `json:"keyword"`
	Name        string        `json:"name"`
	Description string        `json:"description"`
	Line        int           `json:"line"`
	Tags        []cukeTag     `json:"tags,omitempty"`
	Elements    []cukeElement `json:"elements"`
}

type cukeTag struct {
	Name string `json:"name"`
	Line int    `json:"line"`
}

type cukeElement struct {
	ID          string     `json:"id"`
	Keyword     string     `json:"keyword"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Line        int        `json:"line"`
	Type        string     `json:"type"`
	Tags        []cukeTag  `json:"tags,omitempty"`
	Steps       []cukeStep `json:"steps"`
}

type cukeStep struct {
	Keyword    string          `json:"keyword"`
	Name       string          `json:"name"`
	Line       int             `json:"line"`
	DocString  *cukeDocString  `json:"doc_string,omitempty"`
	Rows       []cukeRow       `json:"rows,omitempty"`
	Match      cukeMatch       `json:"match"`
	Result     cukeResult      `json:"result"`
	Embeddings []cukeEmbedding `json:"embeddings,omitempty"`
}

type cukeDocString struct {
	Value       string `json:"value"`
	ContentType string `json:"content_type,omitempty"`
}

type cukeRow struct {
	Cells []string `json:"cells"`
}

type cukeMatch struct {
	Location string `json:"location"`
}

type cukeResult struct {
	Status       string `json:"status"`
	ErrorMessage string `json:"error_message,omitempty"`
	Duration     int64  `json:"duration"`
}

type cukeEmbedding struct {
	Name     string `json:"name"`
	MimeType string `json:"mime_type"`
	Data     []byte `json:"data"` // encoding/json writes base64, as the format wants
}

// buildCucumber is a feature per feature file of each bed, an element per scenario, a step
// per step; the steps a scenario never reached are "skipped".
func buildCucumber(r Result, featuresDir string) []cukeFeature {
	out := []cukeFeature{}
	for _, b := range r.Beds {
		at := map[string]int{} // feature uri -> index in out, within this bed
		for _, sc := range b.Scenarios {
			i, ok := at[sc.Feature]
			if !ok {
				f := cukeFeature{URI: displayPath(featuresDir, sc.Feature), Elements: []cukeElement{}}
				if sc.src != nil && sc.src.feature != nil {
					sf := sc.src.feature
					f.Keyword, f.Name, f.Description = sf.Keyword, sf.Name, sf.Description
					f.Line = int(sf.Location.Line)
					for _, t := range sf.Tags {
						f.Tags = append(f.Tags, cukeTag{t.Name, int(t.Location.Line)})
					}
				}
				f.ID = cukeID(f.Name)
				i = len(out)
				at[sc.Feature] = i
				out = append(out, f)
			}
			out[i].Elements = append(out[i].Elements, cukeScenario(out[i], sc, featuresDir))
		}
	}
	return out
}

func cukeScenario(f cukeFeature, sc *ScenarioResult, featuresDir string) cukeElement {
	e := cukeElement{
		ID:   fmt.Sprintf("%s;%s;%d", f.ID, cukeID(sc.Name), sc.Line),
		Name: sc.Title(), Line: sc.Line, Type: "scenario", Keyword: "Scenario",
		Steps: []cukeStep{},
	}
	src := sc.src
	if src == nil {
		src = &source{}
	}
	if src.keyword != "" {
		e.Keyword, e.Description = src.keyword, src.description
	}
	for _, t := range src.tags {
		e.Tags = append(e.Tags, cukeTag{t.name, t.line})
	}
	n := max(len(src.steps), len(sc.Steps))
	for i := range n {
		st := cukeStep{Result: cukeResult{Status: "skipped"}}
		if i < len(src.steps) {
			s := src.steps[i]
			st.Keyword, st.Name, st.Line = s.keyword, s.text, s.line
			if a := s.arg; a != nil && a.DocString != nil {
				st.DocString = &cukeDocString{Value: a.DocString.Content, ContentType: a.DocString.MediaType}
			}
			if a := s.arg; a != nil && a.DataTable != nil {
				for _, row := range a.DataTable.Rows {
					var cells []string
					for _, c := range row.Cells {
						cells = append(cells, c.Value)
					}
					st.Rows = append(st.Rows, cukeRow{cells})
				}
			}
			st.Match.Location = fmt.Sprintf("%s:%d", displayPath(featuresDir, sc.Feature), s.line)
		}
		if i < len(sc.Steps) {
			r := sc.Steps[i]
			if st.Name == "" {
				kw, text, _ := strings.Cut(r.Text, " ")
				st.Keyword, st.Name = kw+" ", text
			}
			st.Result = cukeResult{Status: cukeStatus(r.Status), Duration: r.Elapsed.Nanoseconds()}
			if r.Err != nil {
				st.Result.ErrorMessage = r.Err.Error()
			}
			if r.Status == Interrupted {
				st.Result.ErrorMessage = "interrupted: " + st.Result.ErrorMessage
			}
		}
		for _, m := range sc.Measurements {
			if m.step == i {
				st.Embeddings = append(st.Embeddings, cukeEmbedding{
					Name: "measurement: " + m.Name, MimeType: "text/plain", Data: []byte(m.Name + " = " + precise(m.Value)),
				})
			}
		}
		e.Steps = append(e.Steps, st)
	}
	return e
}

// cukeStatus spells a step's status as cucumber reports know them.
func cukeStatus(s Status) string {
	switch s {
	case Errored:
		return "failed"
	case NotRun, Interrupted:
		// Cucumber knows no "interrupted": the step's error_message says it was.
		return "skipped"
	}
	return s.String()
}

func cukeID(name string) string { return strings.ReplaceAll(strings.ToLower(name), " ", "-") }

func writeCucumber(path string, r Result, featuresDir string) error {
	b, err := json.MarshalIndent(buildCucumber(r, featuresDir), "", "  ")
	if err != nil {
		return fmt.Errorf("encode cucumber report: %w", err)
	}
	return writeFile(path, append(b, '\n'))
}
