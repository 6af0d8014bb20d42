package link

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// The waits between attempts of Retry.
const (
	RetryMin = 200 * time.Millisecond
	RetryMax = 5 * time.Second
)

// Retry runs try until it succeeds, says not to go on, or ctx ends,
// waiting longer between attempts each time, from RetryMin up to
// RetryMax, and logging each failure on log; an attempt has at most bound
// (none when zero). A program's first connection goes through it: the
// server may refuse a login for a moment while it reloads its
// configuration (an enrolment elsewhere in the mesh), or not have loaded
// the principal's user yet.
func Retry(ctx context.Context, log *slog.Logger, what string, bound time.Duration, try func(ctx context.Context) (again bool, err error)) error {
	wait := RetryMin
	for {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if bound > 0 {
			actx, cancel = context.WithTimeout(ctx, bound)
		}
		again, err := try(actx)
		cancel()
		if err == nil || !again {
			return err
		}
		log.Warn(what+" failed; retrying", "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %w)", what, context.Cause(ctx), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, RetryMax)
	}
}
