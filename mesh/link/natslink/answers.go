package natslink

import (
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/wire"
)

// maxKeptBytes bounds what a runtime keeps of its answers for callers
// asking again: the oldest go first. A tool's answers are small; a run of
// large ones only shortens how long each is kept.
const maxKeptBytes = 8 << 20

// keptOverhead is what keeping one answer costs beside its bytes, counted
// so that many empty answers are bounded too (32768 at most).
const keptOverhead = 256

// answers keeps each answer a runtime sent, by the reply subject it was
// sent to, for wire.AnswersKept, so that a caller asking again
// (wire.ToolAgainSubject) gets it without the call being run again. An
// answer is only ever sent again to the reply it was made for: knowing a
// reply subject gets nobody an answer meant for another inbox.
type answers struct {
	mu      sync.Mutex
	byReply map[string]*kept
	order   []*kept // oldest first
	bytes   int
	now     func() time.Time
}

type kept struct {
	reply string
	msg   *nats.Msg
	at    time.Time
	size  int
}

func newAnswers() *answers {
	return &answers{byReply: map[string]*kept{}, now: time.Now}
}

// keep records msg, the answer sent to msg.Subject.
func (a *answers) keep(msg *nats.Msg) {
	size := keptOverhead + len(msg.Subject) + len(msg.Data)
	for k, vs := range msg.Header {
		for _, v := range vs {
			size += len(k) + len(v)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.expire(now)
	if size > maxKeptBytes {
		return
	}
	if old, ok := a.byReply[msg.Subject]; ok {
		a.drop(old)
	}
	k := &kept{reply: msg.Subject, msg: msg, at: now, size: size}
	a.byReply[k.reply] = k
	a.order = append(a.order, k)
	a.bytes += size
	for a.bytes > maxKeptBytes {
		a.drop(a.order[0])
	}
}

// again returns the answer sent to reply, if it is still kept.
func (a *answers) again(reply string) (*nats.Msg, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire(a.now())
	k, ok := a.byReply[reply]
	if !ok {
		return nil, false
	}
	return k.msg, true
}

// expire drops what was kept longer than wire.AnswersKept. Lock held.
func (a *answers) expire(now time.Time) {
	for len(a.order) > 0 && now.Sub(a.order[0].at) >= wire.AnswersKept {
		a.drop(a.order[0])
	}
}

// drop forgets k. Lock held.
func (a *answers) drop(k *kept) {
	if a.byReply[k.reply] == k {
		delete(a.byReply, k.reply)
	}
	if len(a.order) > 0 && a.order[0] == k {
		a.order[0] = nil
		a.order = a.order[1:]
	} else if i := slices.Index(a.order, k); i >= 0 {
		a.order = slices.Delete(a.order, i, i+1)
	}
	a.bytes -= k.size
}
