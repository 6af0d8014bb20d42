package compose_test

import (
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/internal/natstest"
)

// TestAnAccountIntroducedByAReloadRoutesNoImport pins the server's
// behaviour that makes the enrolment account part of every composition
// (docs/decisions/0003-enrolment-account-from-genesis.md) and an
// adoption compose the mesh's accounts in two reloads
// (docs/decisions/0012-adoption.md). Account C exports a service to
// account E; a subscriber in C listens on it; a client of E publishes.
// Where E and its import exist from the start and only E's user arrives
// by reload, the message is routed; where E first appears in a reload
// with its import, it is not; where the accounts first appear bare in one
// reload and their exports, imports and users in the next, it is. If the
// second case ever starts routing, the server has changed, and the
// decisions may be revisited; the compositions are right either way.
func TestAnAccountIntroducedByAReloadRoutesNoImport(t *testing.T) {
	const (
		c       = `"C":{"users":[{"user":"c","password":"c"}],"exports":[{"service":"svc.enrol","accounts":["E"]}]}`
		cAlone  = `"C":{"users":[{"user":"c","password":"c"}]}`
		eBare   = `"E":{"imports":[{"service":{"account":"C","subject":"svc.enrol"}}]}`
		eWhole  = `"E":{"users":[{"user":"e","password":"e"}],"imports":[{"service":{"account":"C","subject":"svc.enrol"}}]}`
		ops     = `"OPS":{"users":[{"user":"o","password":"o"}]}`
		conf    = `{"listen":"127.0.0.1:-1","accounts":{`
		closing = `}}`
	)
	for _, tc := range []struct {
		name string
		// reloads are the configurations the server is given after it
		// started with before, one reload each.
		before  string
		reloads []string
		routed  bool
	}{
		{"E and its import there from the start, its user added", conf + c + "," + eBare + closing, []string{conf + c + "," + eWhole + closing}, true},
		{"E and its import introduced by the reload", conf + cAlone + closing, []string{conf + c + "," + eWhole + closing}, false},
		{"C and E introduced with their export and import into a server of other accounts", conf + ops + closing, []string{conf + ops + "," + c + "," + eWhole + closing}, false},
		{"C and E introduced bare, then their export, import and users", conf + ops + closing,
			[]string{conf + ops + `,"C":{},"E":{}` + closing, conf + ops + "," + c + "," + eWhole + closing}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := natstest.ServeConfig(t, tc.before)
			for _, after := range tc.reloads {
				if err := os.WriteFile(path, []byte(after), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := s.Reload(); err != nil {
					t.Fatal(err)
				}
			}
			cc, err := nats.Connect(s.ClientURL(), nats.UserInfo("c", "c"))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			sub, err := cc.SubscribeSync("svc.enrol")
			if err != nil {
				t.Fatal(err)
			}
			if err := cc.Flush(); err != nil {
				t.Fatal(err)
			}
			ec, err := nats.Connect(s.ClientURL(), nats.UserInfo("e", "e"))
			if err != nil {
				t.Fatal(err)
			}
			defer ec.Close()
			if err := ec.Publish("svc.enrol", []byte("claim")); err != nil {
				t.Fatal(err)
			}
			if err := ec.Flush(); err != nil {
				t.Fatal(err)
			}
			// A routed message arrives within milliseconds; the second is
			// the bound on "not routed".
			_, err = sub.NextMsg(time.Second)
			if routed := err == nil; routed != tc.routed {
				t.Fatalf("expected the publication routed into C: %v, got %v (%v)", tc.routed, routed, err)
			}
		})
	}
}
