package amqpconn

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// Bounded runs op, a channel method that takes no context, and gives up
// when ctx ends, closing ch (within its own bound) so that op ends too.
func Bounded(ctx context.Context, ch *Channel, op func() error) error {
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		go func() { _ = ch.Close() }()
		return fmt.Errorf("%w: %w", link.ErrTimeout, ctx.Err())
	}
}

// BrokerCode is the reply code of the broker's error in err (the one that
// closed a channel), or 0.
func BrokerCode(err error) int {
	var e *amqp.Error
	if errors.As(err, &e) && e != amqp.ErrClosed {
		return e.Code
	}
	return 0
}

// Refused maps what closed a channel during an operation: 403 is the
// broker refusing what the account has no grant for.
func Refused(err error) error {
	if BrokerCode(err) == wire.AMQPAccessRefused {
		return fmt.Errorf("%w: %w", link.ErrDenied, err)
	}
	return MapClosed(err)
}

// SendError maps a publish that could not be sent: the context ending
// first is ErrTimeout, like every wait of a call.
func SendError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", link.ErrTimeout, err)
	}
	return Refused(err)
}

// MapClosed turns amqp091's closed-channel error into link.ErrClosed.
func MapClosed(err error) error {
	if errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("%w: %w", link.ErrClosed, err)
	}
	return err
}

// CloseCause is what closed a channel, once it is closed: the broker's
// error, or amqp.ErrClosed for a close of ours or of the connection.
func CloseCause(closed <-chan *amqp.Error) error {
	select {
	case e, ok := <-closed:
		if ok && e != nil {
			return e
		}
	default:
	}
	return amqp.ErrClosed
}

// IsConnectionLevel reports whether err is the end of the whole
// connection (amqp091 hands it to every channel), which Conn reconnects
// from.
func IsConnectionLevel(err error) bool {
	var e *amqp.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case amqp.ConnectionForced, amqp.FrameError, amqp.ChannelError, amqp.InternalError, amqp.UnexpectedFrame:
		return true
	}
	return !e.Server
}
