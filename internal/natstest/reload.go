package natstest

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ReloadOnChange reloads srv whenever path's content changes, looking
// every poll, as the nats image's entrypoint sends nats-server SIGHUP
// (docs/nats-entrypoint.md). A reload the server refuses is given to
// refused (nil: logged). It stops at stop or when the test ends.
func ReloadOnChange(tb testing.TB, srv *server.Server, path string, poll time.Duration, refused func(error)) (stop func()) {
	if refused == nil {
		refused = func(err error) { tb.Logf("reload refused: %v", err) }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		last, _ := os.ReadFile(path)
		tick := time.NewTicker(poll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			cur, err := os.ReadFile(path)
			if err != nil || bytes.Equal(cur, last) {
				continue
			}
			last = cur
			if err := srv.Reload(); err != nil {
				refused(err)
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	tb.Cleanup(stop)
	return stop
}
