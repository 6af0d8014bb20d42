//go:build unix

package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Lock takes an exclusive flock of path, polling until ctx ends, so
// that another process (an apply while run folds the status) waits for
// the update in hand. Closing the file releases it. A state directory not
// there yet has nothing to lock: ok is false and nothing is held.
func Lock(ctx context.Context, path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if absent(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("lock state directory: %w", fileErr(err))
	}
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, false, fmt.Errorf("lock state directory: %w", fileErr(err))
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, false, ctx.Err()
		case <-t.C:
		}
	}
}
