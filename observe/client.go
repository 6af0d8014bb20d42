package observe

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// ErrRefused means the server refused an operation as a permissions
// violation.
var ErrRefused = errors.New("refused by the server as a permissions violation")

// Op is what a principal tries to do with a subject.
type Op string

// The two operations a permission governs.
const (
	Publish   Op = "publish"
	Subscribe Op = "subscribe"
)

// sentinelRoot is a subject no principal is ever granted: its refusal,
// which the server sends after those of everything before it, marks the
// end of a batch.
const sentinelRoot = "observe.sentinel."

// Client is a connection that records the permissions violations the
// server reports to it, in the order the server sent them.
type Client struct {
	*nats.Conn
	mu      sync.Mutex
	refused []violation
	notify  chan struct{}
}

type violation struct {
	op      Op
	subject string
}

// violationRE reads nats.go's rendering of the server's -ERR.
var violationRE = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "([^"]+)"`)

// Dial connects as the credential's principal, at address when it is not
// empty (a mapped port), without reconnecting: a connection the server
// closes stays closed, which is what a bed observes.
func Dial(ctx context.Context, cred wire.Credential, address string, opts ...link.Option) (*Client, error) {
	c := &Client{notify: make(chan struct{}, 1)}
	all := append([]link.Option{
		link.WithErrorHandler(c.onError),
		link.WithNATSOptions(nats.NoReconnect()),
	}, opts...)
	if address != "" {
		all = append(all, link.WithAddress(address))
	}
	nc, err := link.Dial(ctx, cred, all...)
	if err != nil {
		return nil, err
	}
	c.Conn = nc
	return c, nil
}

func (c *Client) onError(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	m := violationRE.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	op := Publish
	if strings.EqualFold(m[1], "subscription") {
		op = Subscribe
	}
	c.mu.Lock()
	c.refused = append(c.refused, violation{op, m[2]})
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Try performs op on subject and reports ErrRefused if the server refused
// it, nil if it accepted it.
func (c *Client) Try(ctx context.Context, op Op, subject string) error {
	refused, err := c.TryAll(ctx, op, []string{subject})
	if err != nil {
		return err
	}
	if refused[subject] {
		return fmt.Errorf("%s %q: %w", op, subject, ErrRefused)
	}
	return nil
}

// TryAll performs op on every subject and returns the set the server
// refused. A subscription it accepted is left in place until the
// connection closes.
func (c *Client) TryAll(ctx context.Context, op Op, subjects []string) (map[string]bool, error) {
	return c.judged(ctx, op, func() error {
		for _, s := range subjects {
			if err := c.do(op, s); err != nil {
				return fmt.Errorf("%s %q: %w", op, s, err)
			}
		}
		return nil
	})
}

// Watch subscribes subject with handler and returns once the server has
// judged the subscription: ErrRefused if it refused it, and then the
// subscription is gone.
func (c *Client) Watch(ctx context.Context, subject string, handler nats.MsgHandler) (*nats.Subscription, error) {
	var sub *nats.Subscription
	refused, err := c.judged(ctx, Subscribe, func() error {
		var err error
		sub, err = c.Subscribe(subject, handler)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %q: %w", subject, err)
	}
	if refused[subject] {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe %q: %w", subject, ErrRefused)
	}
	return sub, nil
}

// judged runs do, which performs operations op, and returns the subjects
// the server refused of them. The batch ends with a sentinel the server
// always refuses: its violation arrives after every earlier one, so what
// has not been refused by then was accepted.
func (c *Client) judged(ctx context.Context, op Op, do func() error) (map[string]bool, error) {
	c.mu.Lock()
	start := len(c.refused)
	c.mu.Unlock()
	if err := do(); err != nil {
		return nil, err
	}
	sentinel := sentinelRoot + nuid.Next()
	if err := c.do(Publish, sentinel); err != nil {
		return nil, err
	}
	if err := c.FlushWithContext(ctx); err != nil {
		return nil, fmt.Errorf("round trip after %s: %w", op, err)
	}
	for {
		c.mu.Lock()
		seen := c.refused[start:]
		for i, v := range seen {
			if v.subject == sentinel {
				out := map[string]bool{}
				for _, r := range seen[:i] {
					if r.op == op {
						out[r.subject] = true
					}
				}
				c.mu.Unlock()
				return out, nil
			}
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the server's verdicts: %w", ctx.Err())
		case <-time.After(time.Second):
			if c.IsClosed() {
				return nil, fmt.Errorf("connection closed while waiting for the server's verdicts: %w", nats.ErrConnectionClosed)
			}
		}
	}
}

func (c *Client) do(op Op, subject string) error {
	if op == Publish {
		return c.Publish(subject, nil)
	}
	_, err := c.SubscribeSync(subject)
	return err
}
