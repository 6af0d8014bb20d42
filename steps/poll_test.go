package steps

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPollsLeaveACostlyCheckHalfTheTime: eventually and within wait at
// least as long as the last check took before the next one, so a check
// that costs (a rabbitmqctl, a command in the controller's container)
// runs half the time, not back to back.
func TestPollsLeaveACostlyCheckHalfTheTime(t *testing.T) {
	const took, window = 60 * time.Millisecond, 600 * time.Millisecond
	for name, poll := range map[string]func(context.Context, time.Duration, func(context.Context) error) error{
		"eventually": eventually,
		"within":     within,
	} {
		calls := 0
		err := poll(context.Background(), window, func(context.Context) error {
			calls++
			time.Sleep(took)
			return errors.New("not yet")
		})
		if err == nil {
			t.Fatalf("%s: expected a check that never passes to fail", name)
		}
		// Back to back it would run window/took = 10 times.
		if calls < 2 || calls > 6 {
			t.Errorf("%s: expected 2 to 6 checks of %s in %s, got %d", name, took, window, calls)
		}
	}
	if got := pause(50*time.Millisecond, 10*time.Millisecond); got != 50*time.Millisecond {
		t.Errorf("expected a cheap check's interval kept, got %s", got)
	}
}
