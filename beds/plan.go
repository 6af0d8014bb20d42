package beds

import (
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/cucumber/godog"
	messages "github.com/cucumber/messages/go/v34"
)

// Scenario is one scenario of a bed as parsed, before anything runs: what `bedrun list`
// prints and what Run expects to see executed. An outline gives one per example row.
type Scenario struct {
	// Feature is the feature file, relative to the features directory.
	Feature string
	// Line is the scenario's line (the example row's, for an outline).
	Line int
	// Name is the scenario's name.
	Name string
	// Example is the example row's values, for a scenario of an outline.
	Example []string
	// ExampleHeader names Example's values: the examples table's header.
	ExampleHeader []string
	// Tags are the scenario's tags, inherited ones included.
	Tags []string
	// Steps are the step lines with their keywords ("Given a mesh").
	Steps []string

	// src is what cucumber.json needs of the source beyond the above.
	src *source
}

// source locates a scenario and its steps in the Gherkin document.
type source struct {
	feature     *messages.Feature
	doc         *document
	pickle      *messages.Pickle
	line        int // of the scenario (the outline's, for an example row): godog's path:line
	keyword     string
	description string
	tags        []srcTag
	steps       []srcStep
}

type srcTag struct {
	name string
	line int
}

type srcStep struct {
	keyword string
	text    string
	line    int
	arg     *messages.PickleStepArgument
}

// Title is the name, with the example's values for a scenario of an outline: the rows of an
// outline share a name.
func (s Scenario) Title() string {
	if len(s.Example) == 0 {
		return s.Name
	}
	return s.Name + " (" + strings.Join(s.Example, ", ") + ")"
}

// Param is the value of the example column named name, for a scenario of an outline.
func (s Scenario) Param(name string) (string, bool) {
	for i, h := range s.ExampleHeader {
		if h == name && i < len(s.Example) {
			return s.Example[i], true
		}
	}
	return "", false
}

// HasTag reports whether the scenario carries tag ("@events"), inherited or its own.
func (s Scenario) HasTag(tag string) bool { return slices.Contains(s.Tags, tag) }

// Where is "feature:line", the form godog and editors accept.
func (s Scenario) Where() string { return fmt.Sprintf("%s:%d", s.Feature, s.Line) }

// Scenarios parses b's feature files in features with godog's own parser and returns the
// scenarios tags selects (godog's tag expression; "" selects all), in run order. It raises
// nothing.
func Scenarios(features fs.FS, b Bed, tags string) ([]Scenario, error) {
	if err := checkTags(tags); err != nil {
		return nil, err
	}
	suite := godog.TestSuite{Options: &godog.Options{
		FS:    features,
		Paths: b.Features,
		Tags:  tags,
	}}
	feats, err := suite.RetrieveFeatures()
	if err != nil {
		return nil, fmt.Errorf("parse features of bed %s: %w", b.Name, err)
	}
	var out []Scenario
	for _, f := range feats {
		doc := &document{gherkin: f.GherkinDocument, pickles: f.Pickles, content: f.Content}
		ast := index(f.GherkinDocument)
		for _, p := range f.Pickles {
			out = append(out, scenarioOf(doc, ast, p))
		}
	}
	return out, nil
}

// scenarioOf is the scenario pickle p of doc, whose index is ast.
func scenarioOf(doc *document, ast ast, p *messages.Pickle) Scenario {
	var feature *messages.Feature
	if doc.gherkin != nil {
		feature = doc.gherkin.Feature
	}
	s := Scenario{Feature: featureOf(p.Uri), Name: p.Name, src: &source{feature: feature, doc: doc, pickle: p}}
	if p.Location != nil {
		s.Line = int(p.Location.Line)
	}
	if sc := ast.scenarios[p.AstNodeIds[0]]; sc != nil {
		s.src.keyword, s.src.description = sc.Keyword, sc.Description
		s.src.line = int(sc.Location.Line)
	}
	if len(p.AstNodeIds) > 1 {
		s.Example = ast.rows[p.AstNodeIds[1]]
		s.ExampleHeader = ast.headers[p.AstNodeIds[1]]
	}
	for _, t := range p.Tags {
		s.Tags = append(s.Tags, t.Name)
		s.src.tags = append(s.src.tags, srcTag{t.Name, ast.lines[t.AstNodeId]})
	}
	for _, st := range p.Steps {
		kw, ok := ast.keywords[st.AstNodeIds[0]]
		if !ok {
			kw = typeKeyword(st.Type)
		}
		s.Steps = append(s.Steps, kw+st.Text)
		s.src.steps = append(s.src.steps, srcStep{kw, st.Text, ast.lines[st.AstNodeIds[0]], st.Argument})
	}
	return s
}

// document is a feature file as parsed: what a run's messages carry of it
// (MessagesFile).
type document struct {
	gherkin *messages.GherkinDocument
	pickles []*messages.Pickle
	content []byte
}

// ast indexes a Gherkin document by node id: the keyword a step is written with ("And "),
// the line of a step or tag, and the scenarios.
type ast struct {
	keywords  map[string]string
	lines     map[string]int
	scenarios map[string]*messages.Scenario
	rows      map[string][]string // example row -> its values
	headers   map[string][]string // example row -> its table's header
}

func index(doc *messages.GherkinDocument) ast {
	a := ast{keywords: map[string]string{}, lines: map[string]int{}, scenarios: map[string]*messages.Scenario{}, rows: map[string][]string{}, headers: map[string][]string{}}
	if doc == nil || doc.Feature == nil {
		return a
	}
	tags := func(ts []*messages.Tag) {
		for _, t := range ts {
			a.lines[t.Id] = int(t.Location.Line)
		}
	}
	steps := func(ss []*messages.Step) {
		for _, s := range ss {
			a.keywords[s.Id] = s.Keyword
			a.lines[s.Id] = int(s.Location.Line)
		}
	}
	child := func(bg *messages.Background, sc *messages.Scenario) {
		if bg != nil {
			steps(bg.Steps)
		}
		if sc != nil {
			a.scenarios[sc.Id] = sc
			tags(sc.Tags)
			steps(sc.Steps)
			for _, ex := range sc.Examples {
				tags(ex.Tags)
				var header []string
				if ex.TableHeader != nil {
					for _, c := range ex.TableHeader.Cells {
						header = append(header, c.Value)
					}
				}
				for _, row := range ex.TableBody {
					var vals []string
					for _, c := range row.Cells {
						vals = append(vals, c.Value)
					}
					a.rows[row.Id] = vals
					a.headers[row.Id] = header
				}
			}
		}
	}
	tags(doc.Feature.Tags)
	for _, c := range doc.Feature.Children {
		child(c.Background, c.Scenario)
		if c.Rule != nil {
			tags(c.Rule.Tags)
			for _, rc := range c.Rule.Children {
				child(rc.Background, rc.Scenario)
			}
		}
	}
	return a
}

// typeKeyword is the keyword of a step whose source is unknown.
func typeKeyword(t messages.PickleStepType) string {
	switch t {
	case messages.PickleStepType_CONTEXT:
		return "Given "
	case messages.PickleStepType_ACTION:
		return "When "
	case messages.PickleStepType_OUTCOME:
		return "Then "
	}
	return "* "
}

// scenarioKey identifies a scenario across two parses of the same files: godog's pickle ids
// are generated, its locations are not.
func scenarioKey(uri string, loc *messages.Location) string {
	uri = featureOf(uri)
	if loc == nil {
		return uri
	}
	return fmt.Sprintf("%s:%d", uri, loc.Line)
}

// featureOf is the feature file of a godog uri, which ends in ":line" when the path given
// to godog selected a scenario by its line.
func featureOf(uri string) string {
	if i := strings.LastIndex(uri, ".feature:"); i >= 0 {
		return uri[:i+len(".feature")]
	}
	return uri
}

// Select returns the scenarios of plan that a run with Options.Match would run: those whose
// title match selects, an outline's example rows one by one.
func Select(plan []Scenario, match *regexp.Regexp) []Scenario {
	if match == nil {
		return plan
	}
	s, _, _ := narrow(plan, match)
	return s
}

// narrow keeps the scenarios whose title match selects. paths make godog run them:
// "feature:line" of each scenario, an outline's own line for its rows, since godog selects an
// outline by that line alone and then runs every row of it. hide is therefore, per feature
// file, the lines of the rows of a selected outline that match did not select: the runner
// hides them from godog (hideRows) so that a --run naming one row runs that row alone.
func narrow(plan []Scenario, match *regexp.Regexp) (kept []Scenario, paths []string, hide map[string][]int) {
	type at struct {
		feature string
		line    int
	}
	outline := func(s Scenario) at {
		k := at{s.Feature, s.Line}
		if s.src != nil && s.src.line != 0 {
			k.line = s.src.line
		}
		return k
	}
	want := map[at]bool{}
	for _, s := range plan {
		if k := outline(s); match.MatchString(s.Title()) && !want[k] {
			want[k] = true
			paths = append(paths, fmt.Sprintf("%s:%d", k.feature, k.line))
		}
	}
	for _, s := range plan {
		switch {
		case match.MatchString(s.Title()):
			kept = append(kept, s)
		case want[outline(s)]:
			if hide == nil {
				hide = map[string][]int{}
			}
			hide[s.Feature] = append(hide[s.Feature], s.Line)
		}
	}
	return kept, paths, hide
}

// hideRows returns features with the example rows at the lines hide names turned into
// comments: godog then never sees them, and every other line keeps its number, so the
// scenarios it runs are still found by "feature:line".
func hideRows(features fs.FS, hide map[string][]int) (fs.FS, error) {
	if len(hide) == 0 {
		return features, nil
	}
	o := overlay{FS: features, files: map[string][]byte{}}
	for name, lines := range hide {
		data, err := fs.ReadFile(features, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		rows := strings.SplitAfter(string(data), "\n")
		for _, l := range lines {
			if l < 1 || l > len(rows) || !strings.HasPrefix(strings.TrimSpace(rows[l-1]), "|") {
				return nil, fmt.Errorf("hide example row %s:%d: not a table row", name, l)
			}
			rows[l-1] = "#" + rowEnd(rows[l-1])
		}
		o.files[name] = []byte(strings.Join(rows, ""))
	}
	return o, nil
}

// rowEnd is the line ending of line: "\n", "\r\n" or "" for the last line of a file.
func rowEnd(line string) string {
	switch {
	case strings.HasSuffix(line, "\r\n"):
		return "\r\n"
	case strings.HasSuffix(line, "\n"):
		return "\n"
	}
	return ""
}

// overlay is an fs.FS whose files named in files read as given there.
type overlay struct {
	fs.FS
	files map[string][]byte
}

func (o overlay) Open(name string) (fs.File, error) {
	data, ok := o.files[name]
	if !ok {
		return o.FS.Open(name)
	}
	fi, err := fs.Stat(o.FS, name)
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(data), info: memInfo{FileInfo: fi, size: int64(len(data))}}, nil
}

// memFile is a file of an overlay: its bytes, and the underlying file's info but for its size.
type memFile struct {
	*bytes.Reader
	info memInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

type memInfo struct {
	fs.FileInfo
	size int64
}

func (i memInfo) Size() int64 { return i.size }
