package harness

import "context"

// pauseFault freezes a member (the cgroup freezer): its sockets stay open
// and nothing answers on them, the way a hung machine looks to its peers
// until their keep-alives give up. Undone by thawing it.
type pauseFault struct{}

func (pauseFault) Name() string { return "pause" }

func (pauseFault) Inject(ctx context.Context, m *Handle) error {
	if err := m.Pause(ctx); err != nil {
		return err
	}
	return waitState(ctx, m, "paused", func(s State) bool { return s.Status == "paused" })
}

func (pauseFault) Undo(ctx context.Context, m *Handle) error {
	if err := m.Unpause(ctx); err != nil {
		return err
	}
	return waitState(ctx, m, "running", func(s State) bool { return s.Running && s.Status == "running" })
}
