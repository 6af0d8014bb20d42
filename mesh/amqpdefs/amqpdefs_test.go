package amqpdefs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func load(t *testing.T, name string) *meshdesc.Mesh {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fakeHashes stand in for salted hashes: the golden file must not depend
// on random salt.
func fakeHashes(m *meshdesc.Mesh) map[string]string {
	h := map[string]string{}
	for _, u := range slices.Concat(Users(m), ControlUsers(m)) {
		h[u] = "hash-of-" + u
	}
	return h
}

func TestDefinitionsGolden(t *testing.T) {
	for _, name := range []string{"mesh.yaml", "conformance.yaml"} {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			got, err := Render(m, Inputs{Hashes: fakeHashes(m)})
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", strings.TrimSuffix(name, ".yaml")+".definitions.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./mesh/amqpdefs -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("definitions differ from %s (run with -update after checking the diff):\n%s", golden, got)
			}
			again, _ := Render(m, Inputs{Hashes: fakeHashes(m)})
			if !bytes.Equal(got, again) {
				t.Fatal("expected the same bytes from the same inputs")
			}
		})
	}
}

func TestDefinitionsRefuseAMissingHash(t *testing.T) {
	m := load(t, "mesh.yaml")
	h := fakeHashes(m)
	delete(h, wire.AMQPUser("node-b", "logger"))
	if _, err := Build(m, Inputs{Hashes: h}); err == nil || !strings.Contains(err.Error(), "mod.node-b.logger") {
		t.Fatalf("expected a refusal naming mod.node-b.logger, got %v", err)
	}
	if _, err := Build(m, Inputs{Hashes: fakeHashes(m), MaxDeliver: -1}); err == nil {
		t.Fatal("expected a negative max deliver refused")
	}
}

// TestModuleGrantsComeFromTheManifest rebuilds each module user's grants
// from its manifest alone, spelled out here rather than through the
// package's helpers, and compares them with what Build gives.
func TestModuleGrantsComeFromTheManifest(t *testing.T) {
	for _, name := range []string{"mesh.yaml", "conformance.yaml"} {
		m := load(t, name)
		d, err := Build(m, Inputs{Hashes: fakeHashes(m)})
		if err != nil {
			t.Fatal(err)
		}
		for _, pl := range m.Placements() {
			mod, node := pl.Module, pl.Node
			user := "mod." + node + "." + mod.Name
			var write, read, emits, binds, calls []string
			if len(mod.AllEmits()) > 0 {
				write = append(write, `mesh\.events`)
			}
			if len(mod.Uses) > 0 {
				write = append(write, `mesh\.rpc`)
			}
			if len(mod.AllTools()) > 0 {
				write = append(write, `amq\.default`)
			}
			if len(mod.Consumes) > 0 {
				read = append(read, node+`\.`+mod.Name+`\.events`)
			}
			for _, tool := range mod.AllTools() {
				read = append(read, `serve\.`+mod.Name+`\.`+tool)
			}
			for _, k := range mod.AllEmits() {
				emits = append(emits, mod.Name+`\.`+strings.ReplaceAll(k, ".", `\.`))
			}
			for _, c := range mod.Consumes {
				k := strings.ReplaceAll(c, ".", `\.`)
				k = strings.ReplaceAll(k, "*", `\*`)
				k = strings.Replace(k, ">", `\*\.#`, 1)
				binds = append(binds, k)
			}
			for _, u := range mod.Uses {
				target, tool, _ := strings.Cut(u, ".")
				for _, other := range m.Modules {
					if other.Seat == target {
						target = other.Name
					}
				}
				if tool == "*" {
					calls = append(calls, `serve\.`+target+`\.[^.]+`)
				} else {
					calls = append(calls, `serve\.`+target+`\.`+tool)
				}
			}
			wantPerm := Permission{User: user, Vhost: "mesh", Configure: "^$", Write: alt(write), Read: alt(read)}
			if got := findPerm(t, d, user); got != wantPerm {
				t.Errorf("%s: expected %+v, got %+v", user, wantPerm, got)
			}
			wantTopics := []TopicPermission{
				{User: user, Vhost: "mesh", Exchange: "mesh.events", Write: alt(emits), Read: alt(binds)},
				{User: user, Vhost: "mesh", Exchange: "mesh.rpc", Write: alt(calls), Read: "^$"},
			}
			if got := findTopics(d, user); !slices.Equal(got, wantTopics) {
				t.Errorf("%s: expected topic permissions %+v, got %+v", user, wantTopics, got)
			}
		}
	}
}

// The grants do what they say: RabbitMQ matches a permission's regular
// expression against a name, unanchored, as regexp.MatchString does.
func TestGrantsAllowAndRefuse(t *testing.T) {
	m := load(t, "mesh.yaml")
	d, err := Build(m, Inputs{Hashes: fakeHashes(m)})
	if err != nil {
		t.Fatal(err)
	}
	sensor, logger := wire.AMQPUser("node-a", "sensor"), wire.AMQPUser("node-b", "logger")
	topicOf := func(user, exchange string) TopicPermission {
		for _, tp := range findTopics(d, user) {
			if tp.Exchange == exchange {
				return tp
			}
		}
		t.Fatalf("no topic permission of %s on %s", user, exchange)
		return TopicPermission{}
	}
	cases := []struct {
		what, re, name string
		want           bool
	}{
		{"sensor publishes its reading", topicOf(sensor, "mesh.events").Write, "sensor.reading", true},
		{"sensor publishes alarm.raised", topicOf(sensor, "mesh.events").Write, "sensor.alarm.raised", true},
		{"sensor publishes a key it does not emit", topicOf(sensor, "mesh.events").Write, "sensor.alarm.cleared", false},
		{"sensor publishes as another module", topicOf(sensor, "mesh.events").Write, "logger.reading", false},
		{"a dot is not any character", topicOf(sensor, "mesh.events").Write, "sensorxreading", false},
		{"logger publishes nothing", topicOf(logger, "mesh.events").Write, "logger.reading", false},
		{"logger calls catalog_tools", topicOf(logger, "mesh.rpc").Write, "serve.mesh-catalog.catalog_tools", true},
		{"logger calls another tool", topicOf(logger, "mesh.rpc").Write, "serve.sensor.calibrate", false},
		{"sensor calls nothing", topicOf(sensor, "mesh.rpc").Write, "serve.mesh-catalog.catalog_tools", false},
		{"logger reads its queue", findPerm(t, d, logger).Read, "node-b.logger.events", true},
		{"logger reads another node's queue", findPerm(t, d, logger).Read, "node-a.logger.events", false},
		{"sensor serves calibrate", findPerm(t, d, sensor).Read, "serve.sensor.calibrate", true},
		{"sensor serves an undeclared tool", findPerm(t, d, sensor).Read, "serve.sensor.undeclared", false},
		{"sensor answers through the default exchange", findPerm(t, d, sensor).Write, "amq.default", true},
		{"logger answers nothing", findPerm(t, d, logger).Write, "amq.default", false},
		{"sensor writes mesh.events", findPerm(t, d, sensor).Write, "mesh.events", true},
		{"sensor writes mesh.rpc", findPerm(t, d, sensor).Write, "mesh.rpc", false},
		{"a module configures nothing", findPerm(t, d, sensor).Configure, "node-a.sensor.events", false},
		{"bob calls every tool", topicOf(wire.PersonUser("bob"), "mesh.rpc").Write, "serve.sensor.calibrate", true},
		{"alice calls calibrate", topicOf(wire.PersonUser("alice"), "mesh.rpc").Write, "serve.sensor.calibrate", true},
		{"alice calls catalog_tools", topicOf(wire.PersonUser("alice"), "mesh.rpc").Write, "serve.mesh-catalog.catalog_tools", false},
	}
	for _, c := range cases {
		if got := regexp.MustCompile(c.re).MatchString(c.name); got != c.want {
			t.Errorf("%s: %q against %q: expected %v, got %v", c.what, c.re, c.name, c.want, got)
		}
	}
}

// The mesh declares the whole topology: every binding joins a declared
// exchange to a declared queue, every consumer has its events queue with
// the delivery limit and the dead-letter exchange, every tool its queue.
func TestTopologyIsComplete(t *testing.T) {
	m := load(t, "mesh.yaml")
	d, err := Build(m, Inputs{Hashes: fakeHashes(m), MaxDeliver: 3})
	if err != nil {
		t.Fatal(err)
	}
	exchanges := map[string]Exchange{}
	for _, e := range d.Exchanges {
		if e.Vhost == "mesh" {
			exchanges[e.Name] = e
		}
	}
	queues := map[string]Queue{}
	for _, q := range d.Queues {
		if q.Vhost == "mesh" {
			queues[q.Name] = q
		}
	}
	for _, b := range d.Bindings {
		if b.Vhost != "mesh" {
			continue
		}
		if _, ok := exchanges[b.Source]; !ok {
			t.Errorf("binding %+v: undeclared exchange", b)
		}
		if _, ok := queues[b.Destination]; !ok {
			t.Errorf("binding %+v: undeclared queue", b)
		}
	}
	if exchanges["mesh.events"].Type != "topic" || exchanges["mesh.rpc"].Type != "topic" || exchanges["mesh.dead"].Type != "fanout" {
		t.Errorf("expected mesh.events and mesh.rpc topic, mesh.dead fanout, got %+v", d.Exchanges)
	}
	lq, ok := queues["node-b.logger.events"]
	if !ok {
		t.Fatal("expected the logger's events queue")
	}
	if lq.Arguments["x-queue-type"] != "quorum" || lq.Arguments["x-delivery-limit"] != 2 || lq.Arguments["x-dead-letter-exchange"] != "mesh.dead" || !lq.Durable {
		t.Errorf("expected a durable quorum queue with 3 deliveries and mesh.dead, got %+v", lq)
	}
	var keys []string
	for _, b := range d.Bindings {
		if b.Destination == "node-b.logger.events" {
			keys = append(keys, b.RoutingKey)
		}
	}
	if !slices.Equal(keys, []string{"sensor.alarm.*.#", "sensor.reading"}) {
		t.Errorf("expected the logger's queue bound to its two consumes, got %v", keys)
	}
	for _, q := range []string{"node-a.sensor.events", "node-a.mesh-catalog.events"} {
		if _, ok := queues[q]; ok {
			t.Errorf("expected no events queue %s for a module that consumes nothing", q)
		}
	}
	for _, q := range []string{"serve.sensor.calibrate", "serve.mesh-catalog.catalog_tools", "mesh.dead"} {
		if _, ok := queues[q]; !ok {
			t.Errorf("expected queue %s", q)
		}
	}
	if !slices.Equal(d.Vhosts, []Vhost{{"mesh"}, {"control"}}) {
		t.Errorf("expected the vhosts mesh and control, got %v", d.Vhosts)
	}
	for _, u := range d.Users {
		// The owner tag alone: it grants nothing, where "management" or
		// "administrator" would open the management API.
		if u.HashingAlgorithm != "rabbit_password_hashing_sha256" || u.Tags != wire.AMQPOwnerTag {
			t.Errorf("expected %s hashed with sha256 and tagged %q only, got %+v", u.Name, wire.AMQPOwnerTag, u)
		}
	}
	// The document is what load_definitions reads: the sections by name.
	raw, _ := Render(m, Inputs{Hashes: fakeHashes(m)})
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(raw, &sections); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"users", "vhosts", "permissions", "topic_permissions", "exchanges", "queues", "bindings"} {
		if _, ok := sections[s]; !ok {
			t.Errorf("expected section %s", s)
		}
	}
}

// The hash is RabbitMQ's sha256 scheme; the expected value was computed
// with openssl and base64, not with this package.
func TestHashPassword(t *testing.T) {
	const want = "AQIDBD1e8evdzO2AgfQJ3NX/vJ4ymjQ6anhp3Jt/QoSlgfsZ"
	if got := HashPassword("pw-mod.node-a.sensor", [4]byte{1, 2, 3, 4}); got != want {
		t.Fatalf("expected %s, got %s", want, got)
	}
	a, err := NewPasswordHash("secret")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewPasswordHash("secret")
	raw, err := base64.StdEncoding.DecodeString(a)
	if err != nil || len(raw) != 36 || a == b {
		t.Fatalf("expected 4 bytes of random salt and 32 of hash, got %d bytes (%v), equal twice: %v", len(raw), err, a == b)
	}
	if HashPassword("secret", [4]byte(raw[:4])) != a {
		t.Fatal("expected the hash reproduced from its own salt")
	}
}

// TestPasswordHash: the same password hashes alike every time, to a hash
// RabbitMQ checks the password against (its salt, then sha256 of salt and
// password), and two passwords differ in salt as in hash.
func TestPasswordHash(t *testing.T) {
	a, b := PasswordHash("secret"), PasswordHash("secret")
	if a != b {
		t.Fatalf("expected one hash for one password, got %s and %s", a, b)
	}
	raw, err := base64.StdEncoding.DecodeString(a)
	if err != nil || len(raw) != 36 {
		t.Fatalf("expected 4 bytes of salt and 32 of hash, got %d (%v)", len(raw), err)
	}
	if HashPassword("secret", [4]byte(raw[:4])) != a {
		t.Fatal("expected the hash reproduced from its own salt, as the broker checks it")
	}
	other, _ := base64.StdEncoding.DecodeString(PasswordHash("secret2"))
	if string(other[:4]) == string(raw[:4]) {
		t.Fatal("expected another password to have another salt")
	}
}

func alt(res []string) string {
	if len(res) == 0 {
		return "^$"
	}
	res = slices.Clone(res)
	slices.Sort(res)
	return "^(" + strings.Join(slices.Compact(res), "|") + ")$"
}

func findPerm(t *testing.T, d Definitions, user string) Permission {
	t.Helper()
	for _, p := range d.Permissions {
		if p.User == user {
			return p
		}
	}
	t.Fatalf("no permissions for %s", user)
	return Permission{}
}

func findTopics(d Definitions, user string) []TopicPermission {
	var out []TopicPermission
	for _, tp := range d.TopicPermissions {
		if tp.User == user {
			out = append(out, tp)
		}
	}
	return out
}

// TestTheStatusQueueIsTheControllersAlone: the controller's status queue
// is declared (and so asserted) in the mesh's vhost, bound to mesh.events
// with exactly the provisioner status keys of any provider, kept without
// a delivery limit or a dead-letter exchange, and read by no principal
// but the controller: no module or person may read it, nor the dead
// letters, nor configure either.
func TestTheStatusQueueIsTheControllersAlone(t *testing.T) {
	for _, name := range []string{"mesh.yaml", "conformance.yaml"} {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			d, err := Build(m, Inputs{Hashes: fakeHashes(m)})
			if err != nil {
				t.Fatal(err)
			}
			objects, err := Objects(m, Inputs{})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(objects.Queues, func(q Queue) bool { return q.Name == wire.QueueStatus })
			if i < 0 {
				t.Fatalf("expected %s among the objects the controller asserts", wire.QueueStatus)
			}
			q := objects.Queues[i]
			want := map[string]any{"x-queue-type": "classic", "x-single-active-consumer": true}
			if q.Vhost != "mesh" || !q.Durable || q.AutoDelete || len(q.Arguments) != len(want) {
				t.Fatalf("expected a durable classic queue of vhost mesh with %v, got %+v", want, q)
			}
			for k, v := range want {
				if q.Arguments[k] != v {
					t.Errorf("expected %s %v, got %+v", k, v, q.Arguments)
				}
			}
			var keys []string
			for _, b := range objects.Bindings {
				if b.Destination == wire.QueueStatus {
					if b.Source != "mesh.events" || b.Vhost != "mesh" {
						t.Errorf("expected %s bound to mesh.events of vhost mesh only, got %+v", wire.QueueStatus, b)
					}
					keys = append(keys, b.RoutingKey)
				}
			}
			if !slices.Equal(keys, []string{"*.provisioner.failing", "*.provisioner.recovered"}) {
				t.Errorf("expected the status keys of any provider, got %v", keys)
			}
			// What the bindings route: a provider's status words, and
			// nothing else it emits.
			for key, routed := range map[string]bool{
				"provider.provisioner.failing":    true,
				"provider.provisioner.recovered":  true,
				"provider.provisioner.retirement": false,
				"sensor.reading":                  false,
				"a.b.provisioner.failing":         false,
			} {
				if got := slices.ContainsFunc(keys, func(k string) bool { return topicMatch(k, key) }); got != routed {
					t.Errorf("routing key %s: expected routed to %s %v, got %v", key, wire.QueueStatus, routed, got)
				}
			}
			readers := map[string][]string{}
			for _, p := range d.Permissions {
				if p.Vhost != "mesh" {
					continue
				}
				for _, queue := range []string{wire.QueueStatus, wire.QueueDead} {
					if regexp.MustCompile(p.Read).MatchString(queue) {
						readers[queue] = append(readers[queue], p.User)
					}
					if regexp.MustCompile(p.Configure).MatchString(queue) && p.User != wire.ControllerMeshUser {
						t.Errorf("expected only %s to configure %s, %s may (%q)", wire.ControllerMeshUser, queue, p.User, p.Configure)
					}
				}
			}
			for _, queue := range []string{wire.QueueStatus, wire.QueueDead} {
				if !slices.Equal(readers[queue], []string{wire.ControllerMeshUser}) {
					t.Errorf("expected %s read by %s alone, got %v", queue, wire.ControllerMeshUser, readers[queue])
				}
			}
		})
	}
}

// topicMatch is RabbitMQ's topic matching for binding keys whose
// wildcards are '*' alone (one word), which is all the status keys use.
func topicMatch(binding, key string) bool {
	b, k := strings.Split(binding, "."), strings.Split(key, ".")
	if len(b) != len(k) {
		return false
	}
	for i := range b {
		if b[i] != "*" && b[i] != k[i] {
			return false
		}
	}
	return true
}
