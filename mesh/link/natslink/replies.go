package natslink

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/wire"
)

// replies is one subscription on an inbox of the bus's own under which
// every call gets a reply subject of its own, as nats.go's requests do;
// unlike theirs, the reply is the caller's to name again, which asking
// again for a lost answer needs (wire.ToolAgainSubject). One subscription
// for every call, not one each: nats.go gives each subscription a buffer
// of half a megabyte.
type replies struct {
	nc *nats.Conn

	mu      sync.Mutex
	prefix  string // "<inbox>.", once subscribed
	waiting map[string]*pending
}

// pending is a call waiting for its answer. The server's no-responders
// statuses come apart from answers: a call asked again hears one for
// every time nobody listened for the asking, and none may push the
// answer out.
type pending struct {
	answer chan *nats.Msg // the first answer
	nobody chan struct{}  // a no-responders status came
}

func newReplies(nc *nats.Conn) *replies {
	return &replies{nc: nc, waiting: map[string]*pending{}}
}

// open gives a new reply subject and what comes to it; done forgets it.
// The subscription is made on the first call: the server has it before
// the call, which is sent after it on the same connection.
func (r *replies) open() (reply string, p *pending, done func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prefix == "" {
		prefix := r.nc.NewInbox() + "."
		if _, err := r.nc.Subscribe(prefix+"*", r.deliver); err != nil {
			return "", nil, nil, err
		}
		r.prefix = prefix
	}
	token := strconv.FormatUint(rand.Uint64(), 36)
	for r.waiting[token] != nil {
		token = strconv.FormatUint(rand.Uint64(), 36)
	}
	p = &pending{answer: make(chan *nats.Msg, 1), nobody: make(chan struct{}, 1)}
	r.waiting[token] = p
	return r.prefix + token, p, func() {
		r.mu.Lock()
		delete(r.waiting, token)
		r.mu.Unlock()
	}, nil
}

// deliver hands what came to a call waiting for it; a second answer to
// one call, or one to a call no longer waiting, is dropped.
func (r *replies) deliver(m *nats.Msg) {
	r.mu.Lock()
	p := r.waiting[strings.TrimPrefix(m.Subject, r.prefix)]
	r.mu.Unlock()
	if p == nil {
		return
	}
	if noResponders(m) {
		select {
		case p.nobody <- struct{}{}:
		default:
		}
		return
	}
	select {
	case p.answer <- m:
	default:
	}
}

// noResponders reports whether m is the server's status that nobody
// subscribes the subject a message with its reply was sent on.
func noResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get(wire.HeaderNATSStatus) == strconv.Itoa(wire.NoRespondersNATS)
}
