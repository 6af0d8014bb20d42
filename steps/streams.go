package steps

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

func (s *scenario) bindStreams(sc *godog.ScenarioContext) {
	sc.Step(`^the server has exactly these streams:$`, s.theServerHasExactlyTheseStreams)
	sc.Step(`^the server has exactly these durable pull consumers:$`, s.theServerHasExactlyTheseConsumers)
	sc.Step(`^I read every stream and consumer the server has$`, s.iReadEveryStream)
	sc.Step(`^every stream and consumer is as it was: same configuration, same creation time, none added or removed$`, s.everyStreamIsAsItWas)
}

// readStreams reads every stream and durable consumer of the two accounts
// the controller holds streams in, each marked with its account. An
// ephemeral consumer (the controller's watch of NODES, an observer's) is
// nobody's configuration and is recreated under another name at will.
func (s *scenario) readStreams(ctx context.Context) (map[string]observe.Stream, error) {
	out := map[string]observe.Stream{}
	for _, acct := range []string{wire.AccountControl, wire.AccountMesh} {
		js, err := s.jetStream(ctx, acct)
		if err != nil {
			return nil, err
		}
		got, err := observe.Streams(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("account %s: %w", acct, err)
		}
		for name, st := range durableOnly(got) {
			st.Account = acct
			out[name] = st
		}
	}
	return out, nil
}

// durableOnly drops the ephemeral consumers from streams.
func durableOnly(streams map[string]observe.Stream) map[string]observe.Stream {
	for _, st := range streams {
		for cname, c := range st.Consumers {
			if c.Config.Durable == "" {
				delete(st.Consumers, cname)
			}
		}
	}
	return streams
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

// discard says what a full stream does, and whether a full subject
// refuses too (past its max per subject) rather than drop its oldest.
func discard(c jetstream.StreamConfig) string {
	switch {
	case c.Discard == jetstream.DiscardNew && c.DiscardNewPerSubject:
		return "refuses new, per subject too"
	case c.Discard == jetstream.DiscardNew:
		return "refuses new"
	}
	return "drops oldest"
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
		if st.Account != row["account"] {
			problems = append(problems, fmt.Sprintf("stream %s: expected it in account %s, it is in %s", name, row["account"], st.Account))
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
		if st.Config.MaxBytes <= 0 || st.Config.MaxMsgSize <= 0 {
			problems = append(problems, fmt.Sprintf("stream %s: expected bounded size and message size, got max bytes %d, max message size %d", name, st.Config.MaxBytes, st.Config.MaxMsgSize))
		}
		if d := discard(st.Config); d != row["when full"] {
			problems = append(problems, fmt.Sprintf("stream %s: expected when full %s, got %s", name, row["when full"], d))
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
