package harness

import "context"

// stopFault stops a member gracefully (SIGTERM, then SIGKILL after the
// grace period); undone by starting it and waiting until it is ready.
type stopFault struct{}

func (stopFault) Name() string { return "stop" }

func (stopFault) Inject(ctx context.Context, m *Handle) error {
	if err := m.Stop(ctx); err != nil {
		return err
	}
	return waitState(ctx, m, "stopped", func(s State) bool { return !s.Running })
}

func (stopFault) Undo(ctx context.Context, m *Handle) error { return startStopped(ctx, m) }
