package natsplane

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
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
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
		{name: "closed before the confirmation", close: true, want: plane.ErrNotSent},
		{name: "confirmed, then closed unanswered", confirmed: true, close: true, want: plane.ErrNoAnswer},
		{name: "the confirmation failed", confirm: errors.New("timeout"), want: plane.ErrNotSent},
		{name: "ended before the confirmation", ended: true, want: plane.ErrNotSent},
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

// TestALoginRefusedIsErrLoginRefused: a token whose login the server
// refuses (here a wrong password; in life one spent past its grace,
// expired or revoked) is ErrLoginRefused, and ErrNotSent, with the
// server's own error kept; the request is never asked for. A live token
// with no controller to confirm its claim is not sent, and not refused.
func TestALoginRefusedIsErrLoginRefused(t *testing.T) {
	data, err := os.ReadFile(natstest.RefusedTokenFile(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	refused, err := wire.ParseCredential(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	asked := false
	_, err = NewEnroller(refused).Enrol(ctx, func(string) []byte { asked = true; return []byte("{}") })
	if !errors.Is(err, plane.ErrLoginRefused) || !errors.Is(err, plane.ErrNotSent) || !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("expected a refused login, not sent, got %v", err)
	}
	if asked {
		t.Error("the request was made for a login refused")
	}
}

// TestAClaimNobodyConfirmsIsNotSent: a live token whose claim CONTROL
// does not confirm (no stream holds it: no controller made them) is
// ErrNotSent when ctx ends, not a refused login; the reply named is the
// token's inbox, with a suffix of its own each time.
func TestAClaimNobodyConfirmsIsNotSent(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, m)
	token := srv.Creds[wire.EnrolUser("tok-node-c")]
	var replies []string
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = NewEnroller(token).Enrol(ctx, func(reply string) []byte {
			replies = append(replies, reply)
			return []byte("{}")
		})
		cancel()
		if !errors.Is(err, plane.ErrNotSent) || errors.Is(err, plane.ErrLoginRefused) {
			t.Fatalf("expected the claim not sent, its login not refused, got %v", err)
		}
	}
	if len(replies) != 2 || replies[0] == replies[1] {
		t.Fatalf("expected a reply of its own for each claim, got %q", replies)
	}
	for _, r := range replies {
		if !strings.HasPrefix(r, wire.EnrolInbox(token.Name)+".") {
			t.Errorf("reply %q is not under the token's inbox %s", r, wire.EnrolInbox(token.Name))
		}
	}
}
