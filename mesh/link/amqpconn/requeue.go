package amqpconn

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Requeues are the deliveries of one consumer that a failing handler
// gave back with a delay. AMQP has no delayed requeue: amqp091's
// Nack requeues at once, and a quorum queue hands the message straight
// back, so five deliveries would be spent in milliseconds. So the
// delivery is kept unsettled for its delay — it holds one place of the
// channel's prefetch meanwhile, and the deliveries behind it go on — and
// is requeued when the delay has passed. The broker still counts the
// deliveries (x-delivery-count) and dead-letters past its limit, as
// before. The delay lives in the consumer's process: if the channel or the
// process goes away first, the broker requeues the delivery at once, which
// is the old behaviour and no worse.
type Requeues struct {
	log *slog.Logger

	mu      sync.Mutex
	waiting map[uint64]*requeue
	done    bool
}

type requeue struct {
	d     amqp.Delivery
	timer *time.Timer
}

func NewRequeues(log *slog.Logger) *Requeues {
	return &Requeues{log: log, waiting: map[uint64]*requeue{}}
}

// After requeues d once delay has passed, or at once when the consumer
// is stopping. Whoever takes d out of waiting — its timer or Flush —
// requeues it, so it is requeued once.
func (r *Requeues) After(d amqp.Delivery, delay time.Duration) error {
	r.mu.Lock()
	if r.done || delay <= 0 {
		r.mu.Unlock()
		return MapClosed(d.Nack(false, true))
	}
	q := &requeue{d: d}
	r.waiting[d.DeliveryTag] = q
	q.timer = time.AfterFunc(delay, func() {
		if r.take(d.DeliveryTag) {
			r.nack(d)
		}
	})
	r.mu.Unlock()
	return nil
}

func (r *Requeues) take(tag uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.waiting[tag]; !ok {
		return false
	}
	delete(r.waiting, tag)
	return true
}

// Flush requeues every delivery still waiting, at once: the consumer is
// stopping, and what it was asked to give back is given back while the
// channel is open, for the next consumer.
func (r *Requeues) Flush() {
	r.mu.Lock()
	r.done = true
	waiting := r.waiting
	r.waiting = map[uint64]*requeue{}
	r.mu.Unlock()
	for _, q := range waiting {
		q.timer.Stop()
		r.nack(q.d)
	}
}

func (r *Requeues) nack(d amqp.Delivery) {
	// A channel gone meanwhile has requeued the delivery itself.
	if err := d.Nack(false, true); err != nil && !errors.Is(err, amqp.ErrClosed) {
		r.log.Error("requeue a delivery after its delay", "delivery_tag", d.DeliveryTag, "err", err)
	}
}
