package natslink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link"
)

// violations turns the server's asynchronous permissions violations into
// errors of the call that caused them. The server drops a publish or a
// subscription its user may not make and says so only in an -ERR line,
// which nats.go hands to the async error handler; the call itself would
// wait for a reply that never comes and time out. So a call registers its
// subject before it sends, and the handler cancels that call's context
// with ErrDenied when the -ERR names the subject. The -ERR is written by
// the server before anything it sends later on the connection, so it
// arrives before the call's deadline unless the deadline was already
// shorter than one round trip.
type violations struct {
	mu      sync.Mutex
	waiting map[string]map[*watch]struct{}
}

type watch struct{ cancel context.CancelCauseFunc }

var violationRE = regexp.MustCompile(`(Publish to|Subscription to) "([^"]+)"`)

func newViolations() *violations {
	return &violations{waiting: map[string]map[*watch]struct{}{}}
}

// watch returns a context cancelled with ErrDenied if the server refuses
// subject, and a release function the caller defers.
func (v *violations) watch(ctx context.Context, subject string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{cancel: cancel}
	v.mu.Lock()
	if v.waiting[subject] == nil {
		v.waiting[subject] = map[*watch]struct{}{}
	}
	v.waiting[subject][w] = struct{}{}
	v.mu.Unlock()
	return ctx, func() {
		v.mu.Lock()
		delete(v.waiting[subject], w)
		if len(v.waiting[subject]) == 0 {
			delete(v.waiting, subject)
		}
		v.mu.Unlock()
		cancel(nil)
	}
}

// observe is given every asynchronous error; it reports whether the error
// was a permissions violation of a watched subject.
func (v *violations) observe(err error) bool {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	m := violationRE.FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	subject := m[2]
	v.mu.Lock()
	defer v.mu.Unlock()
	for w := range v.waiting[subject] {
		w.cancel(fmt.Errorf("%w: %s", link.ErrDenied, err))
	}
	return len(v.waiting[subject]) > 0
}

// refuses reports whether err is the server's permissions violation for
// subject.
func refuses(err error, subject string) bool {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	m := violationRE.FindStringSubmatch(err.Error())
	return m != nil && m[2] == subject
}

// denied returns the denial that cancelled ctx, or nil.
func denied(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, link.ErrDenied) {
		return cause
	}
	return nil
}
