package harness

import (
	"context"
	"fmt"
	"strings"
)

// killServerFault kills the nats-server process itself with SIGKILL, not
// the container. The entrypoint is the container's first process and
// forwards the signals it gets as requests (a TERM is a clean shutdown),
// so the signal is sent from inside: `docker exec <nats> /mesh-nats signal
// KILL` reads the server's pid from the entrypoint's pid file and kills
// it. The entrypoint then exits with 137, like its child, and the
// container stops: nothing restarts the server behind the harness's back.
// Undone by starting the container on the same store and waiting until
// the server says it is ready.
type killServerFault struct{}

func (killServerFault) Name() string { return "kill-server" }

func (killServerFault) Inject(ctx context.Context, m *Handle) error {
	code, out, err := m.Exec(ctx, "/mesh-nats", "signal", "KILL")
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("mesh-nats signal KILL exited %d: %s", code, strings.TrimSpace(out))
	}
	// The server is gone once the entrypoint that waits for it is.
	if err := waitState(ctx, m, "stopped after its server was killed", func(s State) bool { return !s.Running }); err != nil {
		return err
	}
	st, err := m.Inspect(ctx)
	if err != nil {
		return err
	}
	if st.ExitCode != 128+9 {
		return fmt.Errorf("expected the entrypoint to exit 137 (its server killed by SIGKILL), it exited %d", st.ExitCode)
	}
	return nil
}

func (killServerFault) Undo(ctx context.Context, m *Handle) error { return startStopped(ctx, m) }
