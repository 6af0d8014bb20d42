package beds

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	messages "github.com/cucumber/messages/go/v34"
)

// The run as Cucumber Messages (MessagesFile) is the report's data contract: any tool that
// reads cucumber's messages can render or analyse a run, and `bedrun report DIR` renders the
// living specification (SpecPageFile) from it again, raising nothing. What cucumber's
// messages have no word for — a bed, a scenario's time raising clusters, a status beyond
// cucumber's, a measurement — travels in attachments of media types of the beds' own, which
// other tools pass over.
const (
	// mediaBeds is the run's attachment: its beds, in step order, and where its features were.
	mediaBeds = "application/vnd.meshbus.beds+json"
	// mediaScenario is a test case's attachment: its status and time by phase, as the beds count them.
	mediaScenario = "application/vnd.meshbus.scenario+json"
	// mediaMeasurement is a step's attachment: one value it measured.
	mediaMeasurement = "application/vnd.meshbus.measurement+json"
	// runID is the run's id in the messages: one run a file.
	runID = "run"
	// exceptionInfrastructure and exceptionInterrupted mark the statuses cucumber has no word for.
	exceptionInfrastructure = "infrastructure"
	exceptionInterrupted    = "interrupted"
)

type bedsRecord struct {
	// FeaturesDir is the features directory as the run named it (what the reports show);
	// FeaturesAbs the same, absolute (what the page links).
	FeaturesDir string      `json:"features_dir"`
	FeaturesAbs string      `json:"features_abs"`
	Beds        []bedRecord `json:"beds"`
}

type bedRecord struct {
	Name     string        `json:"name"`
	Step     int           `json:"step"`
	Summary  string        `json:"summary"`
	Features []string      `json:"features"`
	Ran      bool          `json:"ran"` // false: on the page, not in the run
	Started  time.Time     `json:"started,omitzero"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Parallel int           `json:"parallel"`
	Err      string        `json:"error,omitempty"`
	Cut      bool          `json:"interrupted,omitempty"`
	// NotRun says why the planned scenarios that did not start did not.
	NotRun string `json:"not_run,omitempty"`
}

type scenarioRecord struct {
	Status   string        `json:"status"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Setup    time.Duration `json:"setup_ns"`
	Raising  time.Duration `json:"raising_ns"`
	Teardown time.Duration `json:"teardown_ns"`
	Raised   int           `json:"clusters_raised,omitempty"`
	Reset    bool          `json:"cluster_reset,omitempty"`
	Error    string        `json:"error,omitempty"`
}

type measurementRecord struct {
	Name  string        `json:"name"`
	Value time.Duration `json:"value_ns"`
	At    time.Time     `json:"at"`
	Step  string        `json:"step"`
}

// pageBed is a bed of the page with its scenarios: those of the run (planned, and the ones
// the selection left out), or, for a bed not in the run, every one, parsed.
type pageBed struct {
	bed       Bed
	result    *BedResult
	scenarios []Scenario // a bed not in the run
	note      string
}

// pageBeds are the beds the page shows (specBeds), each with what the run has of it.
func pageBeds(r Result, featuresDir string) []pageBed {
	ran := map[string]*BedResult{}
	for i := range r.Beds {
		ran[r.Beds[i].Bed.Name] = &r.Beds[i]
	}
	var out []pageBed
	for _, bed := range specBeds(r) {
		pb := pageBed{bed: bed, result: ran[bed.Name]}
		if pb.result == nil {
			if plan, ok := r.others[bed.Name]; ok {
				pb.scenarios = plan
				if len(plan) == 0 {
					pb.note = "Its feature files were not where the run read the features."
				}
			} else if plan, err := Scenarios(os.DirFS(featuresDir), bed, ""); err != nil {
				pb.note = fmt.Sprintf("its scenarios could not be read: %v", err)
			} else {
				pb.scenarios = plan
			}
		}
		out = append(out, pb)
	}
	return out
}

// writeMessages writes r as Cucumber Messages, one envelope a line.
func writeMessages(path string, r Result, featuresDir string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	var errs []error
	emit := func(e *messages.Envelope) {
		if err := enc.Encode(e); err != nil {
			errs = append(errs, err)
		}
	}
	attach := func(media string, v any, a messages.Attachment) {
		b, err := json.Marshal(v)
		if err != nil {
			errs = append(errs, err)
			return
		}
		a.Body, a.MediaType, a.ContentEncoding = string(b), media, messages.AttachmentContentEncoding_IDENTITY
		emit(&messages.Envelope{Attachment: &a})
	}
	emit(&messages.Envelope{Meta: meta()})

	ran := map[string]*BedResult{}
	for i := range r.Beds {
		ran[r.Beds[i].Bed.Name] = &r.Beds[i]
	}
	var beds []pageBed
	for _, bed := range specBeds(r) {
		beds = append(beds, pageBed{bed: bed, result: ran[bed.Name]})
	}
	abs, _ := filepath.Abs(featuresDir)
	rec := bedsRecord{FeaturesDir: featuresDir, FeaturesAbs: abs}
	// The features of every bed of the page are parsed once here, so that every id in the
	// messages is unique (godog numbers each parse from zero, and the run parsed bed by
	// bed); a scenario of the run is found in it by its place.
	var paths []string
	for _, pb := range beds {
		for _, f := range pb.bed.Features {
			// A bed not in the run whose features are not there is on the page without
			// its scenarios (pageBeds says why); one in the run has them.
			if _, err := os.Stat(filepath.Join(featuresDir, f)); err == nil || pb.result != nil {
				paths = append(paths, f)
			}
		}
	}
	byWhere := map[string]*messages.Pickle{}
	feats, err := (&godog.TestSuite{Options: &godog.Options{FS: os.DirFS(featuresDir), Paths: paths}}).RetrieveFeatures()
	if err != nil {
		return fmt.Errorf("write %s: parse the features: %w", MessagesFile, err)
	}
	for _, f := range feats {
		emit(&messages.Envelope{Source: &messages.Source{Uri: f.GherkinDocument.Uri, Data: string(f.Content), MediaType: messages.SourceMediaType_TEXT_X_CUCUMBER_GHERKIN_PLAIN}})
		emit(&messages.Envelope{GherkinDocument: f.GherkinDocument})
		for _, p := range f.Pickles {
			emit(&messages.Envelope{Pickle: p})
			if p.Location != nil {
				byWhere[fmt.Sprintf("%s:%d", featureOf(p.Uri), p.Location.Line)] = p
			}
		}
	}
	for _, pb := range beds {
		br := bedRecord{Name: pb.bed.Name, Step: pb.bed.Step, Summary: pb.bed.Summary, Features: pb.bed.Features}
		if b := pb.result; b != nil {
			br.Ran, br.Started, br.Elapsed, br.Parallel, br.Cut = true, b.Started, b.Elapsed, b.Parallel, b.cut
			if b.Err != nil {
				br.Err = b.Err.Error()
			}
			for _, s := range b.Scenarios {
				if s.Status == NotRun && s.Err != nil && br.NotRun == "" {
					br.NotRun = s.Err.Error()
				}
			}
		}
		rec.Beds = append(rec.Beds, br)
	}

	emit(&messages.Envelope{TestRunStarted: &messages.TestRunStarted{Id: runID, Timestamp: stamp(r.Started)}})
	attach(mediaBeds, rec, messages.Attachment{TestRunStartedId: runID})
	n := 0
	for _, pb := range beds {
		if pb.result == nil {
			continue
		}
		for _, s := range pb.result.Scenarios {
			p := byWhere[s.Where()]
			if p == nil {
				errs = append(errs, fmt.Errorf("scenario %s (%s) is not in the features any more", s.Title(), s.Where()))
				continue
			}
			n++
			tc := &messages.TestCase{Id: fmt.Sprintf("tc%d", n), PickleId: p.Id, TestRunStartedId: runID}
			for j, ps := range p.Steps {
				tc.TestSteps = append(tc.TestSteps, &messages.TestStep{Id: fmt.Sprintf("%s.%d", tc.Id, j), PickleStepId: ps.Id})
			}
			emit(&messages.Envelope{TestCase: tc})
			if s.Status == NotRun {
				continue
			}
			started := fmt.Sprintf("tcs%d", n)
			emit(&messages.Envelope{TestCaseStarted: &messages.TestCaseStarted{Id: started, TestCaseId: tc.Id, Timestamp: stamp(s.Started)}})
			byStep := map[int][]Measurement{}
			for _, m := range s.Measurements {
				byStep[m.step] = append(byStep[m.step], m)
			}
			for j, st := range s.Steps {
				if j >= len(tc.TestSteps) {
					break
				}
				id := tc.TestSteps[j].Id
				at := st.Started
				if at.IsZero() {
					// A step never started (skipped after a failure) has no start;
					// its end is the scenario's start, as cucumber has one.
					at = s.Started
				} else {
					emit(&messages.Envelope{TestStepStarted: &messages.TestStepStarted{TestCaseStartedId: started, TestStepId: id, Timestamp: stamp(at)}})
				}
				for _, m := range byStep[j] {
					attach(mediaMeasurement, measurementRecord{Name: m.Name, Value: m.Value, At: m.At, Step: m.Step},
						messages.Attachment{TestCaseStartedId: started, TestStepId: id})
				}
				emit(&messages.Envelope{TestStepFinished: &messages.TestStepFinished{TestCaseStartedId: started, TestStepId: id,
					TestStepResult: stepResultOf(st), Timestamp: stamp(at.Add(st.Elapsed))}})
			}
			for j, ms := range byStep {
				if j < 0 || j >= len(s.Steps) {
					for _, m := range ms {
						attach(mediaMeasurement, measurementRecord{Name: m.Name, Value: m.Value, At: m.At, Step: m.Step},
							messages.Attachment{TestCaseStartedId: started})
					}
				}
			}
			for _, f := range evidenceFiles(filepath.Dir(path), pb.bed.Name, s.Scenario) {
				emit(&messages.Envelope{ExternalAttachment: &messages.ExternalAttachment{Url: f, MediaType: "text/plain", TestCaseStartedId: started}})
			}
			sr := scenarioRecord{Status: s.Status.String(), Elapsed: s.Elapsed, Setup: s.Setup, Raising: s.Raising, Teardown: s.Teardown, Raised: s.Raised, Reset: s.Reset}
			if s.Err != nil {
				sr.Error = s.Err.Error()
			}
			attach(mediaScenario, sr, messages.Attachment{TestCaseStartedId: started})
			emit(&messages.Envelope{TestCaseFinished: &messages.TestCaseFinished{TestCaseStartedId: started, Timestamp: stamp(s.Started.Add(s.Elapsed))}})
		}
	}
	emit(&messages.Envelope{TestRunFinished: &messages.TestRunFinished{TestRunStartedId: runID, Success: r.OK(), Timestamp: stamp(r.Started.Add(r.Elapsed))}})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("encode %s: %w", MessagesFile, err)
	}
	return writeFile(path, buf.Bytes())
}

// evidenceFiles are the files kept of a scenario (ArtifactDir's), relative to the report
// directory, with slashes.
func evidenceFiles(reportDir, bed string, s Scenario) []string {
	dir := filepath.Join(reportDir, bed, fmt.Sprintf("%d-%s", s.Line, slug(s.Name)))
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if rel, err := filepath.Rel(reportDir, path); err == nil {
				out = append(out, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	return out
}

func meta() *messages.Meta {
	version := "34"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/cucumber/messages/go/v34" {
				version = strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	return &messages.Meta{ProtocolVersion: version, Implementation: &messages.Product{Name: "bedrun"},
		Runtime: &messages.Product{Name: "go", Version: runtime.Version()},
		Os:      &messages.Product{Name: runtime.GOOS}, Cpu: &messages.Product{Name: runtime.GOARCH}}
}

func stamp(t time.Time) *messages.Timestamp {
	ts := messages.GoTimeToTimestamp(t)
	return &ts
}

// cucumberStatus is each status as cucumber's messages spell it, and statusException the
// exception type that tells apart the two statuses cucumber has no word for.
var (
	cucumberStatus = map[Status]messages.TestStepResultStatus{
		Passed: messages.TestStepResultStatus_PASSED, Skipped: messages.TestStepResultStatus_SKIPPED,
		Failed: messages.TestStepResultStatus_FAILED, Errored: messages.TestStepResultStatus_FAILED,
		Undefined: messages.TestStepResultStatus_UNDEFINED, Pending: messages.TestStepResultStatus_PENDING,
		Ambiguous: messages.TestStepResultStatus_AMBIGUOUS, Interrupted: messages.TestStepResultStatus_UNKNOWN,
		NotRun: messages.TestStepResultStatus_UNKNOWN,
	}
	statusException = map[Status]string{Errored: exceptionInfrastructure, Interrupted: exceptionInterrupted}
)

func stepResultOf(st StepResult) *messages.TestStepResult {
	d := messages.GoDurationToDuration(st.Elapsed)
	out := &messages.TestStepResult{Duration: &d, Status: cucumberStatus[st.Status]}
	if st.Err != nil {
		out.Message = st.Err.Error()
	}
	if typ, ok := statusException[st.Status]; ok {
		out.Exception = &messages.Exception{Type: typ, Message: out.Message}
	}
	return out
}

// stepStatusOf reads a step's status back: the one with the result's exception, else the
// one cucumber's word stands for alone.
func stepStatusOf(r *messages.TestStepResult) Status {
	if r == nil {
		return NotRun
	}
	if r.Exception != nil {
		for s, typ := range statusException {
			if typ == r.Exception.Type && cucumberStatus[s] == r.Status {
				return s
			}
		}
	}
	for s := Passed; s <= Ambiguous; s++ {
		if _, special := statusException[s]; !special && cucumberStatus[s] == r.Status {
			return s
		}
	}
	return NotRun
}

func statusNamed(name string) Status {
	for s := NotRun; s <= Ambiguous; s++ {
		if s.String() == name {
			return s
		}
	}
	return NotRun
}

// ReadReport reads back the run a report directory's MessagesFile holds, with the features
// directory it ran from as the run named it and as an absolute path.
func ReadReport(dir string) (r Result, featuresDir, featuresAbs string, err error) {
	f, err := os.Open(filepath.Join(dir, MessagesFile))
	if err != nil {
		return Result{}, "", "", fmt.Errorf("read report: %w", err)
	}
	defer f.Close()
	var (
		docs      = map[string]*document{}
		pickles   = map[string]*messages.Pickle{}
		pickleDoc = map[string]*document{}
		cases     []*messages.TestCase
		starts    = map[string]*messages.TestCaseStarted{} // by test case id
		stepStart = map[string]*messages.TestStepStarted{} // by test step id
		stepEnd   = map[string]*messages.TestStepFinished{}
		scenarios = map[string]scenarioRecord{} // by test case started id
		measured  = map[string][]measurementRecord{}
		rec       bedsRecord
		sources   = map[string][]byte{}
		runStart  time.Time
		runEnd    time.Time
		haveBeds  bool
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		var e messages.Envelope
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return Result{}, "", "", fmt.Errorf("read report: %s line %d: %w", MessagesFile, line, err)
		}
		switch {
		case e.Source != nil:
			sources[e.Source.Uri] = []byte(e.Source.Data)
		case e.GherkinDocument != nil:
			docs[e.GherkinDocument.Uri] = &document{gherkin: e.GherkinDocument, content: sources[e.GherkinDocument.Uri]}
		case e.Pickle != nil:
			d := docs[e.Pickle.Uri]
			if d == nil {
				return Result{}, "", "", fmt.Errorf("read report: pickle %s of %s comes before its document", e.Pickle.Id, e.Pickle.Uri)
			}
			d.pickles = append(d.pickles, e.Pickle)
			pickles[e.Pickle.Id], pickleDoc[e.Pickle.Id] = e.Pickle, d
		case e.TestRunStarted != nil && e.TestRunStarted.Timestamp != nil:
			runStart = messages.TimestampToGoTime(*e.TestRunStarted.Timestamp)
		case e.TestRunFinished != nil && e.TestRunFinished.Timestamp != nil:
			runEnd = messages.TimestampToGoTime(*e.TestRunFinished.Timestamp)
		case e.TestCase != nil:
			cases = append(cases, e.TestCase)
		case e.TestCaseStarted != nil:
			starts[e.TestCaseStarted.TestCaseId] = e.TestCaseStarted
		case e.TestStepStarted != nil:
			stepStart[e.TestStepStarted.TestStepId] = e.TestStepStarted
		case e.TestStepFinished != nil:
			stepEnd[e.TestStepFinished.TestStepId] = e.TestStepFinished
		case e.Attachment != nil:
			a := e.Attachment
			var err error
			switch a.MediaType {
			case mediaBeds:
				err, haveBeds = json.Unmarshal([]byte(a.Body), &rec), true
			case mediaScenario:
				var s scenarioRecord
				err = json.Unmarshal([]byte(a.Body), &s)
				scenarios[a.TestCaseStartedId] = s
			case mediaMeasurement:
				var m measurementRecord
				err = json.Unmarshal([]byte(a.Body), &m)
				measured[a.TestCaseStartedId] = append(measured[a.TestCaseStartedId], m)
			}
			if err != nil {
				return Result{}, "", "", fmt.Errorf("read report: %s line %d: %s: %w", MessagesFile, line, a.MediaType, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Result{}, "", "", fmt.Errorf("read report: %w", err)
	}
	if !haveBeds {
		return Result{}, "", "", fmt.Errorf("read report: %s has no %s attachment: not a run of the beds", MessagesFile, mediaBeds)
	}

	r = Result{Started: runStart, Elapsed: runEnd.Sub(runStart), others: map[string][]Scenario{}}
	asts := map[*document]ast{}
	scenarioOfPickle := func(p *messages.Pickle) Scenario {
		d := pickleDoc[p.Id]
		a, ok := asts[d]
		if !ok {
			a = index(d.gherkin)
			asts[d] = a
		}
		return scenarioOf(d, a, p)
	}
	inBed := func(b bedRecord, uri string) bool { return slices.Contains(b.Features, featureOf(uri)) }
	for _, b := range rec.Beds {
		bed := Bed{Name: b.Name, Step: b.Step, Summary: b.Summary, Features: b.Features}
		if reg, ok := All().find(b.Name); ok {
			bed.Matrix, bed.Owner, bed.Timeout = reg.Matrix, reg.Owner, reg.Timeout
		}
		var all []Scenario
		for _, d := range sortedDocs(docs) {
			if !inBed(b, d.gherkin.Uri) {
				continue
			}
			for _, p := range d.pickles {
				all = append(all, scenarioOfPickle(p))
			}
		}
		if !b.Ran {
			r.others[b.Name] = all
			continue
		}
		br := BedResult{Bed: bed, Started: b.Started, Elapsed: b.Elapsed, Parallel: b.Parallel, cut: b.Cut}
		if b.Err != "" {
			br.Err = errors.New(b.Err)
		}
		planned := map[string]bool{}
		for _, tc := range cases {
			p := pickles[tc.PickleId]
			if p == nil || !inBed(b, p.Uri) {
				continue
			}
			planned[p.Id] = true
			sr := &ScenarioResult{Scenario: scenarioOfPickle(p), Bed: b.Name, Status: NotRun}
			start := starts[tc.Id]
			if start == nil {
				if b.NotRun != "" {
					sr.Err = errors.New(b.NotRun)
				}
				br.Scenarios = append(br.Scenarios, sr)
				continue
			}
			if start.Timestamp != nil {
				sr.Started = messages.TimestampToGoTime(*start.Timestamp)
			}
			if s, ok := scenarios[start.Id]; ok {
				sr.Status, sr.Elapsed, sr.Setup, sr.Raising, sr.Teardown = statusNamed(s.Status), s.Elapsed, s.Setup, s.Raising, s.Teardown
				sr.Raised, sr.Reset = s.Raised, s.Reset
				if s.Error != "" {
					sr.Err = errors.New(s.Error)
				}
			}
			for j, ts := range tc.TestSteps {
				fin := stepEnd[ts.Id]
				if fin == nil {
					continue
				}
				st := StepResult{Status: stepStatusOf(fin.TestStepResult)}
				if j < len(sr.Scenario.Steps) {
					st.Text = sr.Scenario.Steps[j]
				}
				if s := stepStart[ts.Id]; s != nil && s.Timestamp != nil {
					st.Started = messages.TimestampToGoTime(*s.Timestamp)
				}
				if res := fin.TestStepResult; res != nil {
					if res.Duration != nil {
						st.Elapsed = messages.DurationToGoDuration(*res.Duration)
					}
					if res.Message != "" {
						st.Err = errors.New(res.Message)
					}
				}
				sr.Steps = append(sr.Steps, st)
			}
			for _, m := range measured[start.Id] {
				sr.Measurements = append(sr.Measurements, Measurement{Bed: b.Name, Scenario: sr.Title(), Where: sr.Where(),
					Step: m.Step, Name: m.Name, Value: m.Value, At: m.At, step: slices.Index(sr.Scenario.Steps, m.Step)})
			}
			br.Scenarios = append(br.Scenarios, sr)
		}
		for _, s := range all {
			if s.src != nil && s.src.pickle != nil && !planned[s.src.pickle.Id] {
				br.unselected = append(br.unselected, s)
			}
		}
		r.Beds = append(r.Beds, br)
	}
	return r, rec.FeaturesDir, rec.FeaturesAbs, nil
}

// sortedDocs are the documents in the order of their paths.
func sortedDocs(docs map[string]*document) []*document {
	uris := make([]string, 0, len(docs))
	for u := range docs {
		uris = append(uris, u)
	}
	slices.Sort(uris)
	out := make([]*document, 0, len(uris))
	for _, u := range uris {
		out = append(out, docs[u])
	}
	return out
}
