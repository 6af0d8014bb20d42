package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockImage takes an exclusive lock on building ref, across processes:
// `go test ./...` runs several packages' tests at once, and on a cold
// machine two of them would otherwise compile nats-server side by side on
// two cores. The second waits, then finds the image up to date.
func lockImage(ctx context.Context, ref string) (unlock func(), err error) {
	path := filepath.Join(os.TempDir(), "mesh-image-"+sanitize(ref)+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", ref, err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", ref, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another build of %s: %w", ref, ctx.Err())
		case <-tick.C:
		}
	}
}

func sanitize(ref string) string {
	out := []byte(ref)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			out[i] = '_'
		}
	}
	return string(out)
}
