package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/internal/natstest"
)

// TestAnAnswerReadBeforeTheCloseIsKept pins what Enrol's wait is built
// on. The answer reaches the token's connection, then the reload that
// revokes the token's user closes it before the answer is taken: a
// synchronous subscription then refuses NextMsg (ErrConnectionClosed),
// the message pending or not, while a channel subscription keeps it.
func TestAnAnswerReadBeforeTheCloseIsKept(t *testing.T) {
	const (
		both   = `{"listen":"127.0.0.1:-1","accounts":{"A":{"users":[{"user":"token","password":"t"},{"user":"controller","password":"c"}]}}}`
		revoke = `{"listen":"127.0.0.1:-1","accounts":{"A":{"users":[{"user":"controller","password":"c"}]}}}`
	)
	srv, path := natstest.ServeConfig(t, both)
	tok, err := nats.Connect(srv.ClientURL(), nats.UserInfo("token", "t"), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	closed := tok.StatusChanged(nats.CLOSED)
	sync, err := tok.SubscribeSync("answer")
	if err != nil {
		t.Fatal(err)
	}
	answers := make(chan *nats.Msg, 1)
	if _, err := tok.ChanSubscribe("answer", answers); err != nil {
		t.Fatal(err)
	}
	if err := tok.Flush(); err != nil {
		t.Fatal(err)
	}
	ctl, err := nats.Connect(srv.ClientURL(), nats.UserInfo("controller", "c"))
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	if err := ctl.Publish("answer", []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Flush(); err != nil {
		t.Fatal(err)
	}
	// A round trip of the token's connection: the answer, sent before
	// its PONG, has been read by it.
	if err := tok.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(revoke), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked user's connection was not closed")
	}
	if _, err := sync.NextMsg(time.Second); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("expected the synchronous subscription to refuse after the close, got %v", err)
	}
	select {
	case msg := <-answers:
		if string(msg.Data) != "sealed" {
			t.Fatalf("expected the answer, got %q", msg.Data)
		}
	default:
		t.Fatal("expected the channel subscription to keep the answer read before the close")
	}
}

// TestAwaitAnswer: an answer ends the wait whatever the confirmation's
// state; a connection closed before the request was confirmed, with no
// answer read, is ErrNotSent, and after it an answer missed.
func TestAwaitAnswer(t *testing.T) {
	answer := &nats.Msg{Data: []byte("answer")}
	for _, tc := range []struct {
		name      string
		answered  bool  // an answer is in the channel
		confirm   error // sent on confirmed, if set
		confirmed bool  // a confirmation (nil) comes first
		close     bool
		ended     bool  // the caller's context ends first
		want      error // nil: the answer
	}{
		{name: "answered before the confirmation", answered: true},
		{name: "answered, then closed", answered: true, close: true},
		{name: "confirmed, then answered", confirmed: true, answered: true},
		{name: "closed before the confirmation", close: true, want: ErrNotSent},
		{name: "confirmed, then closed unanswered", confirmed: true, close: true, want: ErrNoAnswer},
		{name: "the confirmation failed", confirm: errors.New("timeout"), want: ErrNotSent},
		{name: "ended before the confirmation", ended: true, want: ErrNotSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answers := make(chan *nats.Msg, 1)
			confirmed := make(chan error, 1)
			closed := make(chan nats.Status, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if tc.ended {
				cancel()
			}
			if tc.confirm != nil {
				confirmed <- tc.confirm
			}
			if tc.confirmed {
				confirmed <- nil
				// Taken before anything else is offered.
				go func() {
					for len(confirmed) > 0 {
						time.Sleep(time.Millisecond) // polling a channel's length, bounded by ctx
					}
					if tc.answered {
						answers <- answer
					}
					if tc.close {
						closed <- nats.RECONNECTING
					}
				}()
			} else {
				if tc.answered {
					answers <- answer
				}
				if tc.close {
					closed <- nats.CLOSED
				}
			}
			msg, err := awaitAnswer(ctx, answers, confirmed, closed)
			if tc.want == nil {
				if err != nil || msg != answer {
					t.Fatalf("expected the answer, got %v (%v)", msg, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("expected %v, got %v (%v)", tc.want, err, msg)
			}
		})
	}
}

// TestAHostWhoseTokenTheBusRefusesStopsSayingANewOneIsNeeded: a token
// whose user the bus refuses (here a wrong password; in life one spent
// past its grace, expired or revoked, or a host killed between its answer
// and keeping it) is asked again for TokenRefusedFor, then the host stops
// with ErrTokenRefused rather than retry for ever.
func TestAHostWhoseTokenTheBusRefusesStopsSayingANewOneIsNeeded(t *testing.T) {
	dir := t.TempDir()
	tokenFile := natstest.RefusedTokenFile(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err := Run(ctx, Options{State: State{Dir: filepath.Join(dir, "state")}, TokenFile: tokenFile, TokenRefusedFor: time.Second})
	if !errors.Is(err, ErrTokenRefused) || !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "new token") {
		t.Fatalf("expected the host to stop saying a new token is needed, got %v", err)
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Errorf("the host gave up after %v, asked to after a second of refusals", took)
	}
}
