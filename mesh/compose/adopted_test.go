package compose

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
)

// raisedConf is a server as an operator raised it beside the broker: its
// own name, listeners, TLS, JetStream store and account.
const raisedConf = `# raised by the operator, before the mesh knew of it
server_name: beside
listen: 0.0.0.0:4222
http: nats:8222
tls { cert_file: "/etc/nats/server-cert.pem", key_file: "/etc/nats/server-key.pem" }
jetstream { store_dir: /data, max_file: 1GB }
accounts {
  OPS { jetstream: enabled, users: [ {user: ops, password: "ops-secret"} ] }
}
`

func adoptedFrom(t *testing.T, raised string, bare bool) map[string]any {
	t.Helper()
	r, err := ReadRaised([]byte(raised))
	if err != nil {
		t.Fatal(err)
	}
	composed, err := Config(sample(t), Inputs{Hashes: fakeHashes(sample(t))})
	if err != nil {
		t.Fatal(err)
	}
	f := Adopted
	if bare {
		f = AdoptedBare
	}
	out, err := f(r, composed)
	if err != nil {
		t.Fatal(err)
	}
	// nats-server reads what the controller writes.
	m, err := conf.Parse(string(out))
	if err != nil {
		t.Fatalf("nats-server cannot read the adopted configuration: %v\n%s", err, out)
	}
	return m
}

func TestAdoptedKeepsWhatTheServerWasRaisedWithAndAddsTheMeshsAccounts(t *testing.T) {
	m := adoptedFrom(t, raisedConf, false)
	if m["server_name"] != "beside" || m["listen"] != "0.0.0.0:4222" || m["http"] != "nats:8222" {
		t.Errorf("expected the raised name and listeners kept, got %v %v %v", m["server_name"], m["listen"], m["http"])
	}
	if js := m["jetstream"].(map[string]any); js["store_dir"] != "/data" || js["max_file"] != int64(1<<30) {
		t.Errorf("expected the raised JetStream kept, got %v", js)
	}
	accounts := m["accounts"].(map[string]any)
	if got := slices.Sorted(maps.Keys(accounts)); !slices.Equal(got, []string{"CONTROL", "ENROL", "HOSTS", "MESH", "OPS", "SOURCES"}) {
		t.Errorf("expected the raised account beside the mesh's, got %v", got)
	}
	ops := accounts["OPS"].(map[string]any)
	if users := ops["users"].([]any); len(users) != 1 || users[0].(map[string]any)["password"] != "ops-secret" {
		t.Errorf("expected the raised account's user kept as it was, got %v", ops)
	}
	control := accounts["CONTROL"].(map[string]any)
	if users, _ := control["users"].([]any); len(users) == 0 {
		t.Errorf("expected the mesh's control account whole, got %v", control)
	}
}

func TestAdoptedBareNamesTheMeshsAccountsAlone(t *testing.T) {
	accounts := adoptedFrom(t, raisedConf, true)["accounts"].(map[string]any)
	for name, a := range accounts {
		if name == "OPS" {
			continue
		}
		if len(a.(map[string]any)) != 0 {
			t.Errorf("expected account %s bare, got %v", name, a)
		}
	}
	if len(accounts) != 6 {
		t.Errorf("expected six accounts, got %d", len(accounts))
	}
}

func TestAdoptionRefusesWhatItCannotKeep(t *testing.T) {
	composed, err := Config(sample(t), Inputs{Hashes: fakeHashes(sample(t))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, raised, want string
	}{
		{"not a configuration", "listen: {", "nats-server cannot read it"},
		{"no TLS", strings.Replace(raisedConf, `tls { cert_file: "/etc/nats/server-cert.pem", key_file: "/etc/nats/server-key.pem" }`, "", 1), "no tls block"},
		{"no JetStream", strings.Replace(raisedConf, "jetstream { store_dir: /data, max_file: 1GB }", "", 1), "it has no jetstream"},
		{"JetStream off", strings.Replace(raisedConf, "jetstream { store_dir: /data, max_file: 1GB }", "jetstream: false", 1), "jetstream is off"},
		{"an operator", raisedConf + "operator: /etc/nats/op.jwt\n", "it sets operator"},
		{"an include", raisedConf + "include ./more.conf\n", "includes other files"},
		{"a mesh account's name", strings.Replace(raisedConf, "OPS {", "CONTROL {", 1), "it already has account CONTROL"},
		{"a mesh user's name", strings.Replace(raisedConf, "{user: ops,", "{user: controller,", 1), "it already has user controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ReadRaised([]byte(tc.raised))
			if err == nil {
				_, err = Adopted(r, composed)
			}
			if !errors.Is(err, ErrNotAdoptable) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("expected ErrNotAdoptable saying %q, got %v", tc.want, err)
			}
		})
	}
}
