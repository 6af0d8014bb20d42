package rabbitmq

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func apply(opts ...Option) settings {
	s := defaultSettings()
	for _, o := range opts {
		o(&s)
	}
	return s
}

func TestRender(t *testing.T) {
	s := apply(WithAdmin("admin", "s3cret"), WithUser("mesh-a", "pw a"), WithVhost("mesh"),
		WithPermissions("mesh-a", "mesh", "^mesh-a\\.", ".*", ".*"), WithConfig("heartbeat = 10"))
	conf, defs, err := s.render()
	if err != nil {
		t.Fatal(err)
	}
	wantConf := `# Written by harness/rabbitmq for this container.
loopback_users.guest = false
default_user = admin
default_pass = s3cret
load_definitions = /etc/rabbitmq/mesh-definitions.json
heartbeat = 10
`
	if string(conf) != wantConf {
		t.Fatalf("expected config\n%s\ngot\n%s", wantConf, conf)
	}
	if strings.Contains(string(defs), "s3cret") || strings.Contains(string(defs), "pw a") {
		t.Fatalf("expected no password in the clear in the definitions:\n%s", defs)
	}
	var doc struct {
		Users []struct {
			Name             string
			PasswordHash     string `json:"password_hash"`
			HashingAlgorithm string `json:"hashing_algorithm"`
			Tags             []string
		}
		Vhosts      []struct{ Name string }
		Permissions []permission
	}
	if err := json.Unmarshal(defs, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Users) != 2 || doc.Users[0].Name != "admin" || doc.Users[1].Name != "mesh-a" {
		t.Fatalf("expected users admin and mesh-a, got %+v", doc.Users)
	}
	if tags := doc.Users[0].Tags; len(tags) != 1 || tags[0] != "administrator" {
		t.Fatalf("expected the administrator tag on admin, got %q", tags)
	}
	if doc.Users[1].Tags == nil || len(doc.Users[1].Tags) != 0 {
		t.Fatalf("expected an empty tag list for mesh-a, got %q", doc.Users[1].Tags)
	}
	for i, pw := range []string{"s3cret", "pw a"} {
		if !hashMatches(t, doc.Users[i].PasswordHash, pw) || doc.Users[i].HashingAlgorithm != hashingAlgorithm {
			t.Errorf("user %s: hash %q (%s) does not match its password", doc.Users[i].Name, doc.Users[i].PasswordHash, doc.Users[i].HashingAlgorithm)
		}
	}
	if len(doc.Vhosts) != 2 || doc.Vhosts[0].Name != "/" || doc.Vhosts[1].Name != "mesh" {
		t.Fatalf("expected vhosts / and mesh, got %+v", doc.Vhosts)
	}
	want := []permission{
		{User: "admin", Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"},
		{User: "admin", Vhost: "mesh", Configure: ".*", Write: ".*", Read: ".*"},
		{User: "mesh-a", Vhost: "mesh", Configure: "^mesh-a\\.", Write: ".*", Read: ".*"},
	}
	if len(doc.Permissions) != len(want) {
		t.Fatalf("expected permissions %+v, got %+v", want, doc.Permissions)
	}
	for i := range want {
		if doc.Permissions[i] != want[i] {
			t.Fatalf("expected permissions %+v, got %+v", want, doc.Permissions)
		}
	}
}

// hashMatches checks the layout RabbitMQ reads: base64 of a 4-byte salt
// and sha256(salt ‖ password).
func hashMatches(t *testing.T, hash, password string) bool {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(hash)
	if err != nil || len(b) != 4+sha256.Size {
		return false
	}
	sum := sha256.Sum256(append(b[:4:4], password...))
	return string(b[4:]) == string(sum[:])
}

func TestHashWithSalt(t *testing.T) {
	// The example of RabbitMQ's documentation (passwords.html, "Computing
	// a password hash"): salt 908DC60A, password test12.
	got := hashWithSalt([]byte{0x90, 0x8d, 0xc6, 0x0a}, "test12")
	const want = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR"
	if got != want {
		t.Fatalf("expected %s, got %s", want, got)
	}
}

func TestRenderRefuses(t *testing.T) {
	for name, opts := range map[string][]Option{
		"empty admin password":    {WithAdmin("admin", "")},
		"blank in admin password": {WithAdmin("admin", "a b")},
		"hash in admin name":      {WithAdmin("ad#min", "x")},
		"user twice":              {WithUser("a", "x"), WithUser("a", "y")},
		"user named as admin":     {WithUser(DefaultAdminUsername, "x")},
		"user without password":   {WithUser("a", "")},
		"vhost twice":             {WithVhost("v"), WithVhost("v")},
		"vhost slash given":       {WithVhost("/")},
		"unknown user":            {WithVhost("v"), WithPermissions("nobody", "v", ".*", ".*", ".*")},
		"unknown vhost":           {WithUser("a", "x"), WithPermissions("a", "v", ".*", ".*", ".*")},
		"config line with break":  {WithConfig("a = 1\nb = 2")},
	} {
		_, _, err := apply(opts...).render()
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: expected ErrInvalidOption, got %v", name, err)
		}
	}
}

func TestURL(t *testing.T) {
	for _, tc := range []struct{ user, pass, vhost, want string }{
		{"guest", "guest", "/", "amqp://guest:guest@127.0.0.1:5672"},
		{"mesh-a", "p@ss/w:rd", "mesh", "amqp://mesh-a:p%40ss%2Fw%3Ard@127.0.0.1:5672/mesh"},
		{"a", "b", "team/one", "amqp://a:b@127.0.0.1:5672/team%2Fone"},
	} {
		if got := URL("127.0.0.1:5672", tc.user, tc.pass, tc.vhost); got != tc.want {
			t.Errorf("URL(%s, %s): expected %s, got %s", tc.user, tc.vhost, tc.want, got)
		}
	}
}
