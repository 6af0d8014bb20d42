package amqpconn

import (
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
)

// Channel is a channel of a Conn whose Close is bounded.
//
// amqp091's Channel.Close sends channel.close and waits for close-ok
// without a bound, and a second Close waits behind the first. A broker
// that stopped reading the connection (a resource alarm blocks a
// connection that publishes; a broker frozen) never answers, and a
// goroutine dump at N = 200 showed a host held that way for fifteen
// minutes (docs/decisions/0013-cutover.md). So a close not answered
// within the Conn's timeout closes the connection under it, by a
// deadline on its socket: that ends the wait, and the Conn dials again.
type Channel struct {
	*amqp.Channel
	c    *Conn
	conn *amqp.Connection // the connection it was opened on
}

// Close closes the channel within the Conn's timeout, or closes its
// connection (the Conn reconnects) and says so.
func (ch *Channel) Close() error {
	if ch.IsClosed() {
		return nil
	}
	bound := ch.c.o.Timeout
	done := make(chan error, 1)
	go func() { done <- ch.Channel.Close() }()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	ch.c.o.Logger.Warn("the broker did not answer a channel's close; closing the connection it was on", "after", bound)
	_ = ch.conn.CloseDeadline(time.Now().Add(bound))
	ch.c.lost(ch.conn, amqp.ErrClosed)
	select {
	case <-done:
	case <-time.After(bound):
		// The socket's deadline has passed: amqp091 is past its reader.
	}
	return fmt.Errorf("close channel: %w: the broker did not answer within %s; the connection was closed", link.ErrTimeout, bound)
}
