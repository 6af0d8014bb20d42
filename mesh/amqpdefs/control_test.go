package amqpdefs

import (
	"regexp"
	"slices"
	"testing"

	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// grantsIn are the users' permissions and topic permissions on mesh.control
// in the control plane's virtual host.
func grantsIn(d Definitions, vhost string) (map[string]Permission, map[string]TopicPermission) {
	perms, topics := map[string]Permission{}, map[string]TopicPermission{}
	for _, p := range d.Permissions {
		if p.Vhost == vhost {
			perms[p.User] = p
		}
	}
	for _, tp := range d.TopicPermissions {
		if tp.Vhost == vhost && tp.Exchange == wire.ExchangeControl {
			topics[tp.User] = tp
		}
	}
	return perms, topics
}

func matches(re, name string) bool { return regexp.MustCompile(re).MatchString(name) }

// Each user has grants in one virtual host only, and the two lists of
// users are the two virtual hosts' users: nobody who may write the mesh's
// default exchange is a user of the control plane.
func TestEveryUserIsInOneVhost(t *testing.T) {
	for _, name := range []string{"mesh.yaml", "conformance.yaml"} {
		m := load(t, name)
		d, err := Build(m, Inputs{Hashes: fakeHashes(m)})
		if err != nil {
			t.Fatal(err)
		}
		meshPerms, _ := grantsIn(d, wire.AMQPVhost)
		controlPerms, _ := grantsIn(d, wire.AMQPControlVhost)
		for _, u := range Users(m) {
			if _, ok := meshPerms[u]; !ok {
				t.Errorf("%s: expected %s to have grants in vhost mesh", name, u)
			}
			if _, ok := controlPerms[u]; ok {
				t.Errorf("%s: expected %s to have no grant in vhost control", name, u)
			}
		}
		for _, u := range ControlUsers(m) {
			if _, ok := controlPerms[u]; !ok {
				t.Errorf("%s: expected %s to have grants in vhost control", name, u)
			}
			if _, ok := meshPerms[u]; ok {
				t.Errorf("%s: expected %s to have no grant in vhost mesh", name, u)
			}
		}
		if len(meshPerms)+len(controlPerms) != len(d.Permissions) || len(d.Users) != len(Users(m))+len(ControlUsers(m)) {
			t.Errorf("%s: expected grants in the two vhosts only, for the listed users only", name)
		}
	}
}

// Who may do what in the control plane, asked of the definitions as the
// broker asks (each regular expression unanchored against a name), for
// every user, not only the ones a case names.
func TestControlGrants(t *testing.T) {
	m := load(t, "mesh.yaml")
	m.Tokens = append(m.Tokens, meshdesc.Token{ID: "tok-other"})
	d, err := Build(m, Inputs{Hashes: fakeHashes(m)})
	if err != nil {
		t.Fatal(err)
	}
	perms, topics := grantsIn(d, wire.AMQPControlVhost)
	users := ControlUsers(m)
	// who lists the users a check lets through.
	who := func(ok func(user string) bool) []string {
		var out []string
		for _, u := range users {
			if ok(u) {
				out = append(out, u)
			}
		}
		return out
	}
	reads := func(queue string) []string {
		return who(func(u string) bool { return matches(perms[u].Read, queue) })
	}
	// A publish on mesh.control needs write on the exchange and, for a
	// user with a topic permission there, the key; the controller has none.
	sends := func(key string) []string {
		return who(func(u string) bool {
			tp, scoped := topics[u]
			return matches(perms[u].Write, wire.ExchangeControl) && (!scoped || matches(tp.Write, key))
		})
	}
	ctl, hostA, hostB := wire.ControllerUser, wire.HostUser("node-a"), wire.HostUser("node-b")
	tok, other := wire.EnrolUser("tok-node-c"), wire.EnrolUser("tok-other")
	cases := []struct {
		what string
		got  []string
		want []string
	}{
		{"configure anything", who(func(u string) bool {
			return matches(perms[u].Configure, "mesh.control") || matches(perms[u].Configure, "x")
		}), []string{ctl}},
		{"write amq.default (route by queue name)", who(func(u string) bool { return matches(perms[u].Write, wire.ExchangeDefault) }), []string{ctl}},
		{"write amq.topic", who(func(u string) bool { return matches(perms[u].Write, "amq.topic") }), []string{ctl}},
		{"bind with a key (topic read)", who(func(u string) bool { tp, ok := topics[u]; return !ok || matches(tp.Read, "#") }), []string{ctl}},
		{"read node.node-a", reads(wire.NodeQueue("node-a")), []string{ctl, hostA}},
		{"read node.node-b", reads(wire.NodeQueue("node-b")), []string{ctl, hostB}},
		{"read builds", reads(wire.QueueBuilds), []string{ctl, wire.BuilderUser}},
		{"read credentials.node-a", reads(wire.CredentialsQueue("node-a")), []string{ctl, hostA}},
		{"read credentials.node-b", reads(wire.CredentialsQueue("node-b")), []string{ctl, hostB}},
		{"read enrol.tok-node-c", reads(wire.EnrolQueue("tok-node-c")), []string{ctl, tok}},
		{"read enrol.tok-other", reads(wire.EnrolQueue("tok-other")), []string{ctl, other}},
		{"read control.node-a.report", reads("control.node-a.report"), []string{ctl}},
		{"read control.node-a.credentials", reads("control.node-a.credentials"), []string{ctl}},
		{"read control.enrol", reads("control.enrol"), []string{ctl}},
		{"send node-a's report", sends(wire.NodeReport("node-a")), []string{ctl, hostA}},
		{"send node-a's heartbeat", sends(wire.NodeAlive("node-a")), []string{ctl, hostA}},
		{"ask node-a's credentials", sends(wire.NodeCredentials("node-a")), []string{ctl, hostA}},
		{"send an enrolment", sends(wire.SubjectEnrol), []string{ctl, tok, other}},
		{"send a build's outcome", sends(wire.SubjectBuilt), []string{ctl, wire.BuilderUser}},
		{"announce modules", sends(wire.SourceChanged("modules")), []string{ctl, wire.SourceUser("modules")}},
		{"push", sends(wire.SubjectPush), []string{ctl}},
		{"declare node-a", sends(wire.NodeDeclare("node-a")), []string{ctl}},
		{"request a build", sends(wire.SubjectBuildRequest), []string{ctl}},
		{"send with a wildcard key", sends("mesh.control.*.report"), []string{ctl}},
		{"send under another node's prefix", sends("mesh.control.node-a.reportx"), []string{ctl}},
	}
	for _, c := range cases {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: expected %v, got %v", c.what, c.want, c.got)
		}
	}
}

// Every control subject a principal may send on reaches one queue of the
// control plane, held (quorum, refusing past its bound) or passing
// (heartbeats and credential requests, which expire), and the queues the
// controller writes are the newest only (node.<node>, an answer) or a
// bounded work queue (builds).
func TestControlTopology(t *testing.T) {
	m := load(t, "mesh.yaml")
	d, err := Build(m, Inputs{Hashes: fakeHashes(m), ControlPerSubject: 7})
	if err != nil {
		t.Fatal(err)
	}
	queues := map[string]Queue{}
	for _, q := range d.Queues {
		if q.Vhost == wire.AMQPControlVhost {
			queues[q.Name] = q
		}
	}
	routes := map[string][]string{}
	for _, b := range d.Bindings {
		if b.Vhost != wire.AMQPControlVhost {
			continue
		}
		if b.Source != wire.ExchangeControl {
			t.Errorf("binding %+v: expected mesh.control as its source", b)
		}
		if _, ok := queues[b.Destination]; !ok {
			t.Errorf("binding %+v: undeclared queue", b)
		}
		routes[b.RoutingKey] = append(routes[b.RoutingKey], b.Destination)
	}
	type want struct {
		kind, overflow string
		max            int
	}
	held := want{"quorum", "reject-publish", 7}
	for key, w := range map[string]want{
		wire.NodeReport("node-a"):      held,
		wire.NodeReport("node-b"):      held,
		wire.SubjectEnrol:              held,
		wire.SubjectBuilt:              held,
		wire.SubjectPush:               held,
		wire.SourceChanged("modules"):  held,
		wire.NodeAlive("node-a"):       {"classic", "drop-head", 1},
		wire.NodeCredentials("node-b"): {"classic", "reject-publish", CredentialRequests},
		wire.NodeDeclare("node-a"):     {"classic", "drop-head", 1},
		wire.SubjectBuildRequest:       held,
	} {
		if len(routes[key]) != 1 {
			t.Errorf("%s: expected one queue, got %v", key, routes[key])
			continue
		}
		q := queues[routes[key][0]]
		if !q.Durable || q.Arguments["x-queue-type"] != w.kind || q.Arguments["x-overflow"] != w.overflow || q.Arguments["x-max-length"] != w.max {
			t.Errorf("%s: expected a durable %s queue of %d, %s, got %+v", key, w.kind, w.max, w.overflow, q)
		}
	}
	if q := queues[wire.NodeQueue("node-b")]; q.Arguments["x-overflow"] != "drop-head" {
		t.Errorf("expected node.node-b declared, newest only, got %+v", q)
	}
	for _, name := range []string{"control.node-a.alive", "control.node-a.credentials"} {
		if _, ok := queues[name].Arguments["x-message-ttl"]; !ok {
			t.Errorf("expected %s's messages to expire, got %+v", name, queues[name])
		}
	}
	ans := queues[wire.EnrolQueue("tok-node-c")]
	if ans.Arguments["x-expires"] != EnrolAnswerExpires.Milliseconds() || ans.Arguments["x-max-length"] != 1 {
		t.Errorf("expected the token's answer queue to expire and hold one answer, got %+v", ans)
	}
	if q := queues[wire.CredentialsQueue("node-a")]; q.Arguments["x-overflow"] != "drop-head" || q.Arguments["x-message-ttl"] == nil {
		t.Errorf("expected node-a's credential answers to drop the oldest and expire, got %+v", q)
	}
	for key, qs := range routes {
		for _, q := range qs {
			if q == wire.EnrolQueue("tok-node-c") || q == wire.CredentialsQueue("node-a") {
				t.Errorf("expected the answer queue %s bound to nothing, bound with %s", q, key)
			}
		}
	}
	if _, err := Build(m, Inputs{Hashes: fakeHashes(m), ControlPerSubject: -1}); err == nil {
		t.Error("expected a negative bound refused")
	}
	h := fakeHashes(m)
	delete(h, wire.HostUser("node-b"))
	if _, err := Build(m, Inputs{Hashes: h}); err == nil {
		t.Error("expected a host without a hash refused")
	}
}
