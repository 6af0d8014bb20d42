package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/mesh/controller/store"
)

// statusWithin bounds the wait for the controller's status to say what a
// step expects: a fold of one event, plus a controller coming back up.
const statusWithin = 30 * time.Second

func (s *scenario) bindStatus(sc *godog.ScenarioContext) {
	sc.Step(`^the controller's status names exactly these failing provisions:$`, s.theStatusNames)
	sc.Step(`^the controller's status names no failing provision$`, s.theStatusNamesNone)
}

// status is the failing provisions' part of the status (fullStatus).
func (s *scenario) status(ctx context.Context) (store.Status, error) {
	st, err := s.fullStatus(ctx)
	return st.Status, err
}

// failingRows are the status's failing provisions in the feature's
// columns, one string per row.
func failingRows(st store.Status) []string {
	out := make([]string, 0, len(st.Failing))
	for _, f := range st.Failing {
		out = append(out, strings.Join([]string{f.Provider, f.Consumer, f.Node, f.Class, f.Since.UTC().Format(time.RFC3339)}, " | "))
	}
	return out
}

func (s *scenario) theStatusNames(ctx context.Context, t *godog.Table) error {
	var want []string
	for _, row := range table(t) {
		want = append(want, strings.Join([]string{row["provider"], row["consumer"], row["node"], row["class"], row["since"]}, " | "))
	}
	slices.Sort(want)
	return s.statusSays(ctx, want)
}

func (s *scenario) theStatusNamesNone(ctx context.Context) error {
	return s.statusSays(ctx, []string{})
}

func (s *scenario) statusSays(ctx context.Context, want []string) error {
	return eventually(ctx, statusWithin, func(ctx context.Context) error {
		st, err := s.status(ctx)
		if err != nil {
			return err
		}
		got := failingRows(st)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("status names %d failing provision(s):\n  %s\nexpected %d:\n  %s",
				len(got), strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
		}
		return nil
	})
}
