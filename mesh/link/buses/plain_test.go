package buses_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestAPlainAMQPCredentialIsRefusedBeforeAnyDial: every principal of the
// control plane given an amqp:// URL (no TLS: nothing for its pin to
// check), or a URL that does not read, is refused before anything is
// dialled, with an error naming the scheme or the URL and never the
// password.
func TestAPlainAMQPCredentialIsRefusedBeforeAnyDial(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, m)

	// A listener where the credentials point: any dial reaching it is
	// counted.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dialled atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialled.Add(1)
			c.Close()
		}
	}()

	const pw = "s3cret-PW-19"
	plain := func(user string) wire.Credential {
		c := srv.Creds[user]
		c.URL = "amqp://" + user + ":" + pw + "@" + ln.Addr().String() + "/" + wire.AMQPControlVhost
		return c
	}
	unreadable := func(user string) wire.Credential {
		c := srv.Creds[user]
		c.URL = "amqps://" + user + ":" + pw + "@" + ln.Addr().String() + ":bad/" + wire.AMQPControlVhost
		return c
	}
	token := func(url string) wire.Credential {
		return wire.Credential{URL: url, Fingerprint: srv.Fingerprint, Principal: wire.PrincipalEnrol, Name: "t1"}
	}
	type closer interface{ Close() error }
	dials := map[string]func(context.Context, func(string) wire.Credential) (closer, error){
		"host": func(ctx context.Context, c func(string) wire.Credential) (closer, error) {
			return buses.DialHost(ctx, c(wire.HostUser("node-a")))
		},
		"controller": func(ctx context.Context, c func(string) wire.Credential) (closer, error) {
			return buses.DialController(ctx, c(wire.ControllerUser), c(wire.ControllerMeshUser), buses.ControllerOptions{})
		},
		"pusher": func(ctx context.Context, c func(string) wire.Credential) (closer, error) {
			return buses.DialPusher(ctx, c(wire.ControllerUser))
		},
		"builder": func(ctx context.Context, c func(string) wire.Credential) (closer, error) {
			return buses.DialBuilder(ctx, c(wire.BuilderUser))
		},
		"source": func(ctx context.Context, c func(string) wire.Credential) (closer, error) {
			return buses.DialSource(ctx, c(wire.SourceUser("modules")))
		},
		"enrolment": func(ctx context.Context, c func(string) wire.Credential) (closer, error) {
			_, err := buses.Enrol(ctx, token(c(wire.EnrolUser("t1")).URL), func(string) []byte { return []byte(`{}`) })
			return nil, err
		},
	}
	for who, dial := range dials {
		for kind, c := range map[string]func(string) wire.Credential{"amqp://": plain, "unreadable": unreadable} {
			cred := func(user string) wire.Credential {
				cr := c(user)
				if cr.URL == "" || strings.HasPrefix(cr.URL, "amqp://:") || strings.HasPrefix(cr.URL, "amqps://:") {
					t.Fatalf("no credential for %s in the sample mesh", user)
				}
				return cr
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			conn, err := dial(ctx, func(user string) wire.Credential {
				if user == wire.EnrolUser("t1") {
					return c(wire.HostUser("node-a")) // only its URL's form is used
				}
				return cred(user)
			})
			cancel()
			if conn != nil {
				_ = conn.Close()
			}
			if !errors.Is(err, wire.ErrBadCredential) {
				t.Errorf("%s, %s: expected ErrBadCredential, got %v", who, kind, err)
				continue
			}
			if kind == "amqp://" && !strings.Contains(err.Error(), "scheme amqp is plain TCP") {
				t.Errorf("%s: expected the error to name the scheme, got %v", who, err)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("%s, %s: the error carries the password: %v", who, kind, err)
			}
		}
	}
	if n := dialled.Load(); n != 0 {
		t.Fatalf("expected nothing dialled, got %d connections", n)
	}
}
