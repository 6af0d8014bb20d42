package confcheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/internal/natstest"
)

func golden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "mesh", "compose", "testdata", "sample.nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGoldenIsAccepted(t *testing.T) {
	if err := Check(golden(t)); err != nil {
		t.Fatalf("expected the composed golden configuration to pass, got %v", err)
	}
}

// TestNoStrictPrefixIsAccepted is the torn-file sweep on the check alone:
// of every prefix of the composed file, only the whole file passes.
func TestNoStrictPrefixIsAccepted(t *testing.T) {
	g := golden(t)
	accepted := 0
	for i := 0; i <= len(g); i++ {
		err := Check(g[:i])
		if err == nil {
			accepted++
			if i != len(g) && strings.TrimSpace(string(g[i:])) != "" {
				t.Errorf("prefix of %d bytes (of %d) accepted", i, len(g))
			}
			continue
		}
		if !errors.Is(err, ErrNotWhole) {
			t.Errorf("prefix of %d bytes: expected ErrNotWhole, got %v", i, err)
		}
	}
	// The golden file ends in a newline: the prefix without it is the
	// same document.
	if accepted != 2 {
		t.Fatalf("expected only the whole file (with and without its final newline) to pass, %d prefixes did", accepted)
	}
}

// threeAccounts is a composition of the shape the hardening issue moves
// to: several accounts, imports and exports, one without JetStream.
const threeAccounts = `{
  "listen": "0.0.0.0:4222",
  "accounts": {
    "CONTROL": {"jetstream": "enabled",
      "exports": [{"stream": "mesh.node.>"}],
      "users": [{"user": "controller", "password": "$2a$04$c", "permissions": {"publish": {"allow": [">"]}}},
                {"user": "host.node-a", "password": "$2a$04$h"}]},
    "MESH": {"jetstream": "enabled",
      "imports": [{"stream": {"account": "CONTROL", "subject": "mesh.node.>"}}],
      "users": [{"user": "mod.node-a.sensor", "password": "$2a$04$m"}]},
    "ENROL": {"users": [{"user": "enrol.tok", "password": "$2a$04$e"}]}
  }
}`

func TestStructure(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf string
		want error // nil: accepted
		says string
	}{
		{"several accounts, imports, one without JetStream", threeAccounts, nil, ""},
		{"trailing data", `{"accounts":{"A":{"users":[{"user":"u","password":"p"}]}}} {`, ErrNotWhole, "the document ends at byte 58 of 60 (line 1) and something follows it"},
		{"two documents", `{"accounts":{"A":{"users":[{"user":"u","password":"p"}]}}}{}`, ErrNotWhole, "and something follows it"},
		{"empty file", ``, ErrNotWhole, "the file is empty"},
		{"white space only", " \n", ErrNotWhole, "the file is empty"},
		{"cut short", `{"accounts":{"A":{"users":[{"user":"u",`, ErrNotWhole, "cut short"},
		{"not an object", `["accounts"]`, ErrNotWhole, "not an object"},
		{"nats syntax, not JSON", "accounts {\n A { users = [{user: u, password: p}] } }", ErrNotWhole, "at byte 1 of 52 (line 1): invalid character 'a'"},
		{"no accounts", `{"listen":"0.0.0.0:4222","jetstream":{"store_dir":"/data"}}`, ErrOpen, "no accounts"},
		{"empty accounts", `{"accounts":{}}`, ErrOpen, "accounts is empty"},
		{"accounts as a list of names", `{"accounts":["A"]}`, ErrOpen, "not an object"},
		{"an account without users beside one with", `{"accounts":{"A":{"users":[{"user":"u","password":"p"}]},"B":{"jetstream":"enabled"}}}`, nil, ""},
		{"no account with a user", `{"accounts":{"A":{"jetstream":"enabled"},"B":{}}}`, ErrOpen, "no account has a user"},
		{"only an empty users list", `{"accounts":{"A":{"users":[]}}}`, ErrOpen, "no account has a user"},
		{"a user only in the authorization block", `{"authorization":{"user":"x","password":"y"},"accounts":{"A":{}}}`, nil, ""},
		{"users not a list", `{"accounts":{"A":{"users":{"user":"u"}}}}`, ErrOpen, "not a list"},
		{"a user without a password", `{"accounts":{"A":{"users":[{"user":"u","password":"p"},{"user":"v"}]}}}`, ErrOpen, `users[1] (user "v") has no password`},
		{"an empty password", `{"accounts":{"A":{"users":[{"user":"u","password":""}]}}}`, ErrOpen, "no password"},
		{"an nkey user", `{"accounts":{"A":{"users":[{"nkey":"UABC"}]}}}`, ErrOpen, "no user name"},
		{"an empty user name", `{"accounts":{"A":{"users":[{"user":" ","password":"p"}]}}}`, ErrOpen, "no user name"},
		{"aliases are read", `{"accounts":{"A":{"users":[{"username":"u","pass":"p"}]}}}`, nil, ""},
		{"no_auth_user", `{"no_auth_user":"u","accounts":{"A":{"users":[{"user":"u","password":"p"}]}}}`, ErrOpen, "no_auth_user"},
		{"no_auth_user in any case, anywhere", `{"websocket":{"No_Auth_User":"u"},"accounts":{"A":{"users":[{"user":"u","password":"p"}]}}}`, ErrOpen, "configuration.websocket.No_Auth_User"},
		{"authorization users without a password", `{"authorization":{"users":[{"user":"x"}]},"accounts":{"A":{"users":[{"user":"u","password":"p"}]}}}`, ErrOpen, "the authorization block, users[0]"},
		{"authorization single user without a password", `{"authorization":{"user":"x"},"accounts":{"A":{"users":[{"user":"u","password":"p"}]}}}`, ErrOpen, "no password"},
		{"an option twice in two cases", `{"accounts":{"A":{"users":[{"user":"u","password":"p"}],"Users":[]}}}`, ErrAmbiguous, `"users" and "Users"`},
		{"a password and its alias", `{"accounts":{"A":{"users":[{"user":"u","password":"p","pass":""}]}}}`, ErrAmbiguous, `"password" and "pass"`},
		{"a key twice", `{"accounts":{"A":{"users":[{"user":"u","password":"p"}]}},"accounts":{}}`, ErrAmbiguous, `"accounts" appears twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.conf))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("expected the configuration to pass, got %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("expected %v, got %v", tc.want, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("expected the error to say %q, got %q", tc.says, err)
			}
		})
	}
}

func TestErrorsNeverQuoteAPassword(t *testing.T) {
	const secret = "$2a$04$do-not-print-me"
	for _, conf := range []string{
		`{"accounts":{"A":{"users":[{"user":"u","password":"` + secret + `","pass":"x"}]}}}`,
		`{"accounts":{"A":{"users":[{"user":"","password":"` + secret + `"}]}}}`,
		`{"accounts":{"A":{"users":[{"user":"u","password":"` + secret + `"}]}}`,
	} {
		err := Check([]byte(conf))
		if err == nil {
			t.Fatalf("expected %s to be refused", conf)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error quotes the password: %v", err)
		}
	}
}

// TestOpenIsWhatTheServerLetsIn holds the check to the server: of two
// whole configurations that differ in one account's users, the one
// refused as open lets a client without a password in, and the one passed
// (an account with no users beside one with) does not. An account without
// users opens nothing: what opens the bus is no user anywhere.
func TestOpenIsWhatTheServerLetsIn(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		open       bool
	}{
		{"a user in one account, none in the other", `{"listen":"127.0.0.1:-1","accounts":{"A":{"users":[{"user":"u","password":"p"}]},"B":{}}}`, false},
		{"no user in any account", `{"listen":"127.0.0.1:-1","accounts":{"A":{},"B":{}}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Check([]byte(tc.conf)); errors.Is(err, ErrOpen) != tc.open {
				t.Fatalf("expected the check to call it open: %v, got %v", tc.open, err)
			}
			s, _ := natstest.ServeConfig(t, tc.conf)
			nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
			if err == nil {
				nc.Close()
			}
			if admitted := err == nil; admitted != tc.open {
				t.Fatalf("expected a client without a password admitted: %v, got %v (%v)", tc.open, admitted, err)
			}
		})
	}
}
