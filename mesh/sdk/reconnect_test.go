package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/sdk"
)

// connectThroughProxy connects user through a proxy the test can cut: the
// network between the module and its bus. Only the port changes; the
// certificate is the bus's, checked as ever.
func connectThroughProxy(t *testing.T, b bus, user string) (*sdk.Module, *testutil.Proxy) {
	t.Helper()
	cred := b.credential(user)
	u, err := url.Parse(cred.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.NewProxy(t, u.Host)
	_, port, _ := net.SplitHostPort(p.Addr())
	u.Host = net.JoinHostPort(u.Hostname(), port)
	cred.URL = u.String()
	return connectAs(t, user, writeCred(t, cred)), p
}

// reconnectsAfterTheBusIsAway: the network fails between every module and
// the bus. Each module comes back by itself: a publish made while the bus
// is away waits for it within its context, the consumer is delivered to
// again, and the tool is served again.
func reconnectsAfterTheBusIsAway(t *testing.T, b bus) {
	sensor, ps := connectThroughProxy(t, b, sensorUser)
	logger, pl := connectThroughProxy(t, b, loggerUser)
	catalog, pc := connectThroughProxy(t, b, catalogUser)
	proxies := []*testutil.Proxy{ps, pl, pc}
	var readings recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	if err := catalog.Handle("catalog_tools", func(_ context.Context, args []byte) ([]byte, error) { return args, nil }); err != nil {
		t.Fatal(err)
	}
	roundTrip := func(n int) {
		t.Helper()
		eventually(t, 30*time.Second, func() (bool, string) {
			return len(readings.got()) == n, fmt.Sprintf("%d readings handled, want %d", len(readings.got()), n)
		})
		// The server may come back after the caller: until it does,
		// nobody serves the tool, which is the answer, not a failure. On
		// AMQP the broker may also still hold the server's consumer of the
		// connection cut, until it notices the connection is gone (Docker's
		// port proxy can hide the close from it for seconds: seen in CI,
		// the broker noticed 12 s later, when a delivery to it failed); a
		// call it hands that consumer times out, and the next goes to the
		// consumer of the new connection.
		args := fmt.Sprintf(`{"n":%d}`, n)
		eventually(t, 30*time.Second, func() (bool, string) {
			out, err := logger.Request(ctxFor(t, 5*time.Second), "mesh-catalog", "catalog_tools", []byte(args))
			if errors.Is(err, sdk.ErrNoResponders) {
				return false, "nobody serves catalog_tools again"
			}
			if errors.Is(err, sdk.ErrTimeout) {
				return false, "a call of catalog_tools timed out: " + err.Error()
			}
			if err != nil || string(out) != args {
				t.Fatalf("call after %d readings: got %s, %v", n, out, err)
			}
			return true, ""
		})
	}
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	roundTrip(1)

	for _, p := range proxies {
		p.Cut()
	}
	// Every module has noticed and tried to come back, in vain.
	eventually(t, 30*time.Second, func() (bool, string) {
		for i, p := range proxies {
			if p.Refused() == 0 {
				return false, fmt.Sprintf("module %d has not tried to reconnect", i)
			}
		}
		return true, ""
	})
	// A publish begun while the sensor is away, and still away after: it
	// must wait for the bus, not fail.
	started, published := make(chan int, 1), make(chan error, 1)
	go func() {
		started <- ps.Refused()
		_, err := sensor.Publish(ctxFor(t, 30*time.Second), "reading", []byte(`{"n":2}`))
		published <- err
	}()
	before := <-started
	eventually(t, 30*time.Second, func() (bool, string) {
		return ps.Refused() > before, "the sensor has not tried again since the publish began"
	})
	select {
	case err := <-published:
		t.Fatalf("a publish returned while the bus was away: %v", err)
	default:
	}
	for _, p := range proxies {
		p.Restore()
	}
	if err := <-published; err != nil {
		t.Fatalf("a publish made while the bus was away: %v", err)
	}
	roundTrip(2)

	// A module closed while its bus is away ends at once, without an
	// error: there is nothing in flight a drain could settle.
	for _, p := range proxies {
		p.Cut()
	}
	for i, m := range []*sdk.Module{sensor, logger, catalog} {
		before := proxies[i].Refused()
		eventually(t, 30*time.Second, func() (bool, string) {
			return proxies[i].Refused() > before, fmt.Sprintf("module %d has not tried to reconnect", i)
		})
		began := time.Now()
		if err := m.Close(); err != nil {
			t.Errorf("module %d closed while the bus was away: %v", i, err)
		}
		if took := time.Since(began); took > 2*time.Second {
			t.Errorf("module %d took %s to close while the bus was away; want at once", i, took)
		}
	}
}
