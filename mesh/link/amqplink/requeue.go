package amqplink

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// requeues are the deliveries of one events consumer that a failing
// handler gave back with a delay. AMQP has no delayed requeue: amqp091's
// Nack requeues at once, and a quorum queue hands the message straight
// back, so five deliveries would be spent in milliseconds. So the
// delivery is kept unsettled for its delay — it holds one place of the
// channel's prefetch meanwhile, and the deliveries behind it go on — and
// is requeued when the delay has passed. The broker still counts the
// deliveries (x-delivery-count) and dead-letters past its limit, as
// before. The delay lives in the module's process: if the channel or the
// module goes away first, the broker requeues the delivery at once, which
// is the old behaviour and no worse.
type requeues struct {
	log *slog.Logger

	mu      sync.Mutex
	waiting map[uint64]*requeue
	done    bool
}

type requeue struct {
	d     amqp.Delivery
	timer *time.Timer
}

func newRequeues(log *slog.Logger) *requeues {
	return &requeues{log: log, waiting: map[uint64]*requeue{}}
}

// after requeues d once delay has passed, or at once when the consumer
// is stopping. Whoever takes d out of waiting — its timer or flush —
// requeues it, so it is requeued once.
func (r *requeues) after(d amqp.Delivery, delay time.Duration) error {
	r.mu.Lock()
	if r.done || delay <= 0 {
		r.mu.Unlock()
		return mapClosed(d.Nack(false, true))
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

func (r *requeues) take(tag uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.waiting[tag]; !ok {
		return false
	}
	delete(r.waiting, tag)
	return true
}

// flush requeues every delivery still waiting, at once: the consumer is
// stopping, and what it was asked to give back is given back while the
// channel is open, for the module's next run.
func (r *requeues) flush() {
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

func (r *requeues) nack(d amqp.Delivery) {
	// A channel gone meanwhile has requeued the delivery itself.
	if err := d.Nack(false, true); err != nil && !errors.Is(err, amqp.ErrClosed) {
		r.log.Error("requeue a delivery after its delay", "delivery_tag", d.DeliveryTag, "err", err)
	}
}
