package steps

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/observe"
)

func (s *scenario) bindStreams(sc *godog.ScenarioContext) {
	sc.Step(`^the server has exactly these streams:$`, s.theServerHasExactlyTheseStreams)
	sc.Step(`^the server has exactly these durable pull consumers:$`, s.theServerHasExactlyTheseConsumers)
	sc.Step(`^I read every stream and consumer the server has$`, s.iReadEveryStream)
	sc.Step(`^the controller is stopped and started again$`, s.theControllerIsRestarted)
	sc.Step(`^every stream and consumer is as it was: same configuration, same creation time, none added or removed$`, s.everyStreamIsAsItWas)
}

func (s *scenario) readStreams(ctx context.Context) (map[string]observe.Stream, error) {
	js, err := s.jetStream(ctx)
	if err != nil {
		return nil, err
	}
	return observe.Streams(ctx, js)
}

// table reads a data table into rows of column → cell.
func table(t *godog.Table) []map[string]string {
	var out []map[string]string
	head := t.Rows[0].Cells
	for _, row := range t.Rows[1:] {
		m := map[string]string{}
		for i, c := range row.Cells {
			m[head[i].Value] = strings.TrimSpace(c.Value)
		}
		out = append(out, m)
	}
	return out
}

// list reads a cell of comma-separated items, sorted.
func list(cell string) []string {
	var out []string
	for _, it := range strings.Split(cell, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	slices.Sort(out)
	return out
}

func retention(p jetstream.RetentionPolicy) string {
	switch p {
	case jetstream.LimitsPolicy:
		return "limits"
	case jetstream.WorkQueuePolicy:
		return "workqueue"
	case jetstream.InterestPolicy:
		return "interest"
	}
	return p.String()
}

func limit(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return strconv.FormatInt(n, 10)
}

func (s *scenario) theServerHasExactlyTheseStreams(ctx context.Context, t *godog.Table) error {
	got, err := s.readStreams(ctx)
	if err != nil {
		return err
	}
	var problems []string
	want := map[string]bool{}
	for _, row := range table(t) {
		name := row["stream"]
		want[name] = true
		st, ok := got[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("stream %s: expected it, the server has none", name))
			continue
		}
		if r := retention(st.Config.Retention); r != row["retention"] {
			problems = append(problems, fmt.Sprintf("stream %s: expected retention %s, got %s", name, row["retention"], r))
		}
		if subj := slices.Sorted(slices.Values(st.Config.Subjects)); !slices.Equal(subj, list(row["subjects"])) {
			problems = append(problems, fmt.Sprintf("stream %s: expected subjects %v, got %v", name, list(row["subjects"]), subj))
		}
		if l := limit(st.Config.MaxMsgsPerSubject); l != row["max per subject"] {
			problems = append(problems, fmt.Sprintf("stream %s: expected max per subject %s, got %s", name, row["max per subject"], l))
		}
		if st.Config.Storage != jetstream.FileStorage {
			problems = append(problems, fmt.Sprintf("stream %s: expected file storage, got %s", name, st.Config.Storage))
		}
	}
	for name := range got {
		if !want[name] {
			problems = append(problems, fmt.Sprintf("stream %s: not expected, the server has it", name))
		}
	}
	return joinProblems(problems)
}

func (s *scenario) theServerHasExactlyTheseConsumers(ctx context.Context, t *godog.Table) error {
	got, err := s.readStreams(ctx)
	if err != nil {
		return err
	}
	var problems []string
	want := map[string]bool{}
	for _, row := range table(t) {
		key := row["stream"] + "/" + row["consumer"]
		want[key] = true
		c, ok := got[row["stream"]].Consumers[row["consumer"]]
		if !ok {
			problems = append(problems, fmt.Sprintf("consumer %s: expected it, the server has none", key))
			continue
		}
		cfg := c.Config
		if cfg.Durable != row["consumer"] {
			problems = append(problems, fmt.Sprintf("consumer %s: expected durable, got durable name %q", key, cfg.Durable))
		}
		if cfg.DeliverSubject != "" {
			problems = append(problems, fmt.Sprintf("consumer %s: expected a pull consumer, got push to %q", key, cfg.DeliverSubject))
		}
		if cfg.AckPolicy != jetstream.AckExplicitPolicy {
			problems = append(problems, fmt.Sprintf("consumer %s: expected explicit ack, got %s", key, cfg.AckPolicy))
		}
		filters := cfg.FilterSubjects
		if cfg.FilterSubject != "" {
			filters = append(filters, cfg.FilterSubject)
		}
		slices.Sort(filters)
		if !slices.Equal(filters, list(row["filters"])) {
			problems = append(problems, fmt.Sprintf("consumer %s: expected filters %v, got %v", key, list(row["filters"]), filters))
		}
	}
	for stream, st := range got {
		for name := range st.Consumers {
			if !want[stream+"/"+name] {
				problems = append(problems, fmt.Sprintf("consumer %s/%s: not expected, the server has it", stream, name))
			}
		}
	}
	return joinProblems(problems)
}

func (s *scenario) iReadEveryStream(ctx context.Context) error {
	var err error
	s.streams, err = s.readStreams(ctx)
	return err
}

func (s *scenario) theControllerIsRestarted(ctx context.Context) error {
	c, err := s.controllerContainer()
	if err != nil {
		return err
	}
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.Start(ctx)
}

func (s *scenario) everyStreamIsAsItWas(ctx context.Context) error {
	if s.streams == nil {
		return fmt.Errorf("no earlier reading of the streams to compare with")
	}
	now, err := s.readStreams(ctx)
	if err != nil {
		return err
	}
	return joinProblems(observe.Diff(s.streams, now))
}

func joinProblems(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%d problem(s):\n  %s", len(problems), strings.Join(problems, "\n  "))
}
