package host

import (
	"context"
	"errors"
	"sync"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// fakeBus is the host's side of the control plane in memory: what a test
// sets is what Newest reads, every report sent is kept in the order it
// was sent (a report sent twice is there twice: the tests count what the
// host sends), and a bus away refuses every report.
type fakeBus struct {
	mu       sync.Mutex
	newest   plane.Declared
	newestOK bool
	away     bool
	reports  []wire.Report
}

func (f *fakeBus) declare(d plane.Declared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.newest, f.newestOK = d, true
}

func (f *fakeBus) setAway(away bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.away = away
}

// held are the reports sent, oldest first.
func (f *fakeBus) held() []wire.Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.Report(nil), f.reports...)
}

func (f *fakeBus) Newest(context.Context, string) (plane.Declared, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.newestOK {
		return plane.Declared{}, plane.ErrNoDeclaration
	}
	return f.newest, nil
}

func (f *fakeBus) Report(_ context.Context, node, id string, body []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.away {
		return errors.New("no CONTROL to hold it")
	}
	r, err := wire.ParseReport(wire.NodeReport(node), body)
	if err != nil {
		return err
	}
	if r.ID != id {
		return errors.New("the message id is not the report's")
	}
	f.reports = append(f.reports, r)
	return nil
}

func (f *fakeBus) Alive(context.Context, string, []byte) error { return nil }

// Credentials answers that no module has one: the declarations the tests
// make declare none.
func (f *fakeBus) Credentials(context.Context, string) ([]byte, error) {
	return wire.CredentialsAnswer{}.Marshal(), nil
}

func (f *fakeBus) Artifact(context.Context, string, int64) ([]byte, error) {
	return nil, errors.New("the fake bus holds no artifact")
}

func (f *fakeBus) Close() error { return nil }

var _ plane.Host = (*fakeBus)(nil)
