package amqpconn

import (
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// acks records how deliveries were settled, by delivery tag.
type acks struct {
	mu     sync.Mutex
	nacked []uint64
}

func (a *acks) Ack(uint64, bool) error    { return nil }
func (a *acks) Reject(uint64, bool) error { return nil }
func (a *acks) Nack(tag uint64, _, requeue bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if requeue {
		a.nacked = append(a.nacked, tag)
	}
	return nil
}

func (a *acks) got() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.nacked)
}

// A delivery given back with a delay is requeued when the delay has
// passed and not before; one given back at once is requeued at once.
func TestRequeueAfterTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &acks{}
		r := NewRequeues(slog.New(slog.DiscardHandler))
		if err := r.After(amqp.Delivery{Acknowledger: a, DeliveryTag: 1}, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := r.After(amqp.Delivery{Acknowledger: a, DeliveryTag: 2}, 0); err != nil {
			t.Fatal(err)
		}
		if got := a.got(); !slices.Equal(got, []uint64{2}) {
			t.Fatalf("expected only the undelayed delivery requeued at once, got %v", got)
		}
		time.Sleep(2*time.Second - time.Millisecond)
		synctest.Wait()
		if got := a.got(); !slices.Equal(got, []uint64{2}) {
			t.Fatalf("expected the delayed delivery still held before its delay, got %v", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := a.got(); !slices.Equal(got, []uint64{2, 1}) {
			t.Fatalf("expected the delayed delivery requeued once its delay passed, got %v", got)
		}
	})
}

// A consumer stopping gives back what was waiting at once, each once, and
// what is given back after it stopped is requeued at once.
func TestRequeueFlushOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &acks{}
		r := NewRequeues(slog.New(slog.DiscardHandler))
		for tag := uint64(1); tag <= 2; tag++ {
			if err := r.After(amqp.Delivery{Acknowledger: a, DeliveryTag: tag}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		r.Flush()
		got := a.got()
		slices.Sort(got)
		if !slices.Equal(got, []uint64{1, 2}) {
			t.Fatalf("expected both waiting deliveries requeued at the stop, got %v", got)
		}
		if err := r.After(amqp.Delivery{Acknowledger: a, DeliveryTag: 3}, time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := a.got(); len(got) != 3 || got[2] != 3 {
			t.Fatalf("expected each requeued once and the late one at once, got %v", got)
		}
	})
}
