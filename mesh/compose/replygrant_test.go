package compose_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/internal/natstest"
)

// TestAReloadRevokesAResponderReplyGrant pins the server's behaviour that
// makes a caller ask again for a tool's answer (wire.ToolAgainSubject,
// docs/decisions/0015-answers-across-reloads.md): a responder with
// allow_responses and no publish grant answers a call it received; where
// the server reloads its configuration (unchanged) between the call and
// the answer, the answer is refused. nats-server's reload re-registers
// every client's user, which makes its reply grants anew and empty. If
// the second case ever passes, the server has changed; asking again is
// harmless either way.
func TestAReloadRevokesAResponderReplyGrant(t *testing.T) {
	const conf = `{"listen":"127.0.0.1:-1","accounts":{"M":{"users":[
		{"user":"caller","password":"c","permissions":{"publish":{"allow":["tool.call"]},"subscribe":{"allow":["_INBOX.caller.>"]}}},
		{"user":"module","password":"m","permissions":{"publish":{"allow":["nothing"]},"subscribe":{"allow":["tool.call"]},"allow_responses":true}}]}}}`
	for _, tc := range []struct {
		name     string
		reload   bool
		answered bool
	}{
		{"answered with no reload between", false, true},
		{"answered after a reload", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := natstest.ServeConfig(t, conf)
			refused := make(chan error, 1)
			mod, err := nats.Connect(s.ClientURL(), nats.UserInfo("module", "m"),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refused <- err }))
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close()
			calls, err := mod.SubscribeSync("tool.call")
			if err != nil {
				t.Fatal(err)
			}
			if err := mod.Flush(); err != nil {
				t.Fatal(err)
			}
			caller, err := nats.Connect(s.ClientURL(), nats.UserInfo("caller", "c"), nats.CustomInboxPrefix("_INBOX.caller"))
			if err != nil {
				t.Fatal(err)
			}
			defer caller.Close()
			answer := make(chan error, 1)
			go func() {
				_, err := caller.Request("tool.call", []byte("x"), 2*time.Second)
				answer <- err
			}()
			call, err := calls.NextMsg(2 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reload {
				if err := s.Reload(); err != nil {
					t.Fatal(err)
				}
			}
			if err := call.Respond([]byte("y")); err != nil {
				t.Fatal(err)
			}
			err = <-answer
			if tc.answered && err != nil {
				t.Fatalf("expected the answer, got %v", err)
			}
			if !tc.answered {
				if !errors.Is(err, nats.ErrTimeout) {
					t.Fatalf("expected the answer refused and the call to time out, got %v", err)
				}
				if v := <-refused; !errors.Is(v, nats.ErrPermissionViolation) {
					t.Fatalf("expected the responder told of a permissions violation, got %v", v)
				}
			}
		})
	}
}
