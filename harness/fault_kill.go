package harness

import "context"

// killFault kills a member's container with SIGKILL: its first process and
// every other one end at once, nothing flushed, as a machine losing power
// would leave its disk. Undone by starting it on the same binds and
// waiting until it is ready.
type killFault struct{}

func (killFault) Name() string { return "kill" }

func (killFault) Inject(ctx context.Context, m *Handle) error {
	if err := m.Kill(ctx, "KILL"); err != nil {
		return err
	}
	return waitState(ctx, m, "dead", func(s State) bool { return !s.Running })
}

func (killFault) Undo(ctx context.Context, m *Handle) error { return startStopped(ctx, m) }
