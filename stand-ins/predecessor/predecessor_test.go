package main

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/harness/rabbitmq"
	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/stand-ins/predecessor/report"
)

// The stand-in against a real broker: it must count nothing amiss where
// nothing is, and count each thing a client could notice when the broker
// does it (a message twice, a gap, its connection closed), or the
// witness built on it could never fail.

const (
	testUser  = "legacy-app"
	testVhost = "legacy"
)

func startStandIn(t *testing.T) (*predecessor, *rabbitmq.RabbitMQContainer) {
	t.Helper()
	br := amqptest.StartBare(t,
		rabbitmq.WithUser(testUser, "s3cret-legacy"),
		rabbitmq.WithVhost(testVhost),
		rabbitmq.WithPermissions(testUser, testVhost, ".*", ".*", ".*"),
	)
	ctx, cancel := context.WithCancel(context.Background())
	url, err := br.AmqpURLFor(ctx, testUser, testVhost)
	if err != nil {
		t.Fatal(err)
	}
	p := newPredecessor(config{url: url, name: "predecessor-test", rate: 50, callRate: 20, callTimeout: 2 * time.Second, retry: 200 * time.Millisecond},
		testUser, testVhost, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, br
}

// waitCounts polls the counts until ok holds or 30 s pass.
func waitCounts(t *testing.T, p *predecessor, what string, ok func(report.Counts) bool) report.Counts {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := p.snapshot()
		if ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30s, expected %s; counts %+v", what, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPredecessorOnABrokerLeftAloneNoticesNothing(t *testing.T) {
	p, _ := startStandIn(t)
	c := waitCounts(t, p, "100 messages back and 30 calls answered", func(c report.Counts) bool {
		return c.Received >= 100 && c.Answered >= 30
	})
	if c.Lost != 0 || c.Duplicated != 0 || c.TimedOut != 0 || c.Nacked != 0 || c.Returned != 0 {
		t.Errorf("expected nothing lost, duplicated, timed out, nacked or returned, got %+v", c)
	}
	if len(c.Connections) != 1 || len(c.Disconnects) != 0 || c.Connections[0].LocalPort == 0 {
		t.Errorf("expected one connection with its port and no disconnect, got %+v and %+v", c.Connections, c.Disconnects)
	}
	if c.Confirmed+1 < c.Received || c.User != testUser || c.Vhost != testVhost {
		t.Errorf("expected %d received ≤ confirmed %d (+1 in flight), user %s in %s; got user %s in %s",
			c.Received, c.Confirmed, testUser, testVhost, c.User, c.Vhost)
	}
}

func TestPredecessorCountsADuplicateAGapAndAClosedConnection(t *testing.T) {
	p, br := startStandIn(t)
	ctx := context.Background()
	before := waitCounts(t, p, "10 messages back", func(c report.Counts) bool { return c.Received >= 10 })

	// Someone else on its virtual host sends it a number it had, and one
	// far ahead of its own.
	url, err := br.AmqpURLFor(ctx, br.AdminUsername, testVhost)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ahead := before.Highest + 100000
	for _, n := range []uint64{1, ahead} {
		if err := ch.PublishWithContext(ctx, eventsExchange, readingsKey, true, false, amqp.Publishing{Body: []byte(strconv.FormatUint(n, 10))}); err != nil {
			t.Fatal(err)
		}
	}
	c := waitCounts(t, p, "the duplicate and the gap counted", func(c report.Counts) bool {
		return c.Duplicated == 1 && c.Highest == ahead
	})
	if c.Lost < 90000 {
		t.Errorf("expected the gap below %d counted lost, got lost %d", ahead, c.Lost)
	}

	// The broker closes its connection: it is counted with the broker's
	// reason, and the stand-in is back on a second one.
	out, err := br.Ctl(ctx, "list_connections", "-q", "--no-table-headers", "pid", "user")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var pid string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] == testUser {
			pid = f[0]
		}
	}
	if pid == "" {
		t.Fatalf("no connection of %s listed:\n%s", testUser, out)
	}
	if out, err := br.Ctl(ctx, "close_connection", pid, "closed by the test"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c = waitCounts(t, p, "a second connection after the first was closed", func(c report.Counts) bool {
		return len(c.Connections) == 2 && len(c.Disconnects) == 1
	})
	if d := c.Disconnects[0]; d.Code != amqp.ConnectionForced || !strings.Contains(d.Reason, "closed by the test") {
		t.Errorf("expected the broker's 320 with its reason, got %+v", d)
	}
	if c.Connections[1].LocalPort == c.Connections[0].LocalPort {
		t.Errorf("expected the second connection on another port, both on %d", c.Connections[0].LocalPort)
	}
}
