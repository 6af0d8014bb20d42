package amqpplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// enrolRetry is how long a claim the broker did not confirm waits before
// it is sent again (with the same message id: the controller's ledger
// keeps one).
const enrolRetry = 2 * time.Second

// enroller claims a token on AMQP.
type enroller struct {
	token wire.Credential
	o     HostOptions
}

// NewEnroller is the enrolment of token (an enrolment credential) on
// AMQP. Its answer queue, wire.EnrolQueue(token), is the reply the claim
// names: declared for the token by the controller, read by the token's
// user alone, durable, so an answer put there while the node was away is
// still there when it comes back.
func NewEnroller(token wire.Credential, o HostOptions) plane.Enroller {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return enroller{token: token, o: o}
}

// Enrol sends the claim into the control plane until the broker confirms
// it, and waits on the answer queue from before the first send, as long
// as ctx allows. A login refused is ErrNotSent and ErrLoginRefused; a
// connection lost before the confirm is ErrNotSent; after it, with no
// answer read, ErrNoAnswer (the answer, if it came, waits in the queue
// for the next attempt).
func (e enroller) Enrol(ctx context.Context, request func(reply string) []byte) ([]byte, error) {
	conn, err := amqpconn.Dial(ctx, e.token, amqpconn.Options{Timeout: e.o.Timeout, Vhost: wire.AMQPControlVhost, Address: e.o.Address, Logger: e.o.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: connect as %s: %w", plane.ErrNotSent, e.token.User(), loginErr(err))
	}
	defer func() { _ = conn.Close(time.Now().Add(time.Second), nil) }()
	reply := wire.EnrolQueue(e.token.Name)
	ch, err := conn.Channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plane.ErrNotSent, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var answers <-chan amqp.Delivery
	err = amqpconn.Bounded(ctx, ch, func() error {
		var err error
		answers, err = ch.Consume(reply, "", false, true, false, false, nil)
		return err
	})
	if err != nil {
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("%w: %w: the answer queue %s: %w", plane.ErrNotSent, plane.ErrMissing, reply, err)
		}
		return nil, fmt.Errorf("%w: consume %s: %w", plane.ErrNotSent, reply, amqpconn.Refused(err))
	}
	body := request(reply)
	pctx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	confirmed := make(chan error, 1)
	go func() { confirmed <- e.send(pctx, conn, body) }()
	sent := false
	for {
		select {
		case d, ok := <-answers:
			if !ok {
				if !sent {
					return nil, fmt.Errorf("%w: the answer queue's channel closed: %w", plane.ErrNotSent, amqpconn.CloseCause(closed))
				}
				return nil, fmt.Errorf("%w: the answer queue's channel closed: %w", plane.ErrNoAnswer, amqpconn.CloseCause(closed))
			}
			_ = d.Ack(false)
			return d.Body, nil
		case err := <-confirmed:
			if err != nil {
				return nil, fmt.Errorf("%w: %w", plane.ErrNotSent, err)
			}
			sent, confirmed = true, nil
		case <-ctx.Done():
			if !sent {
				return nil, fmt.Errorf("%w: the claim was not confirmed: %w", plane.ErrNotSent, context.Cause(ctx))
			}
			return nil, context.Cause(ctx)
		}
	}
}

// send publishes the claim on wire.SubjectEnrol until the broker confirms
// it, each time with the same message id.
func (e enroller) send(ctx context.Context, conn *amqpconn.Conn, body []byte) error {
	pool := amqpconn.NewPool(conn.OpenPublisher)
	defer pool.Close()
	id := wire.NewID()
	for {
		pctx, cancel := context.WithTimeout(ctx, enrolRetry)
		err := amqpconn.Publish(pctx, pool, "the claim", wire.ExchangeControl, wire.SubjectEnrol, true, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: id, UserId: e.token.User(), Body: body,
		})
		cancel()
		err = noExchange(wire.ExchangeControl, err)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, link.ErrDenied), errors.Is(err, amqpconn.ErrUnroutable):
			return err // asking again will not help
		case ctx.Err() != nil:
			return fmt.Errorf("the claim was not confirmed: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the claim was not confirmed: %w", err)
		case <-time.After(enrolRetry / 4):
		}
	}
}
