// Package compose derives the bus's users and permissions from the mesh
// description, and renders the nats-server configuration from them. It is
// pure and deterministic: the same description and hashes give the same
// bytes, and every permission is derived from the manifests' emits,
// consumes, tools and uses and from nothing else (design 25 §4, ADR 0043).
package compose

import (
	"slices"

	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// Principal is one user of the bus: who it is and what it may do.
type Principal struct {
	// User is the user name it connects as.
	User string
	// Account is the account the user is in (wire.Account*).
	Account string
	// Kind is one of the wire.Principal* kinds (empty for a module).
	Kind string
	// Node is set for hosts and modules.
	Node string
	// Module is set for modules.
	Module string
	// Name is set for persons and tokens.
	Name string
	// Permissions are what the server lets the user do.
	Permissions Permissions
	// Tools are, for a person, the tools its client offers
	// (wire.Credential.Tools): "*" for an administrator, else the tools
	// its grant names.
	Tools []string
}

// Permissions are a user's grants: everything not listed is refused by
// the server.
type Permissions struct {
	Publish   []string
	Subscribe []string
	// AllowResponses lets the user answer the reply subject of a message
	// it received; only principals that serve something get it.
	AllowResponses bool
}

// Credential is the credential document the principal is issued, without
// its URL and fingerprint, which the controller fills in.
func (p Principal) Credential() wire.Credential {
	return wire.Credential{Principal: p.Kind, Node: p.Node, Module: p.Module, Name: p.Name, Tools: p.Tools}
}

// Principals lists every user of the mesh, in a fixed order: the
// controller (its two users), each node's host, each module on each node,
// each person, each enrolment token. m must be valid.
func Principals(m *meshdesc.Mesh) []Principal {
	out := []Principal{controller(), controllerMesh(m)}
	for _, n := range m.Nodes {
		out = append(out, host(m, n.Name))
	}
	for _, pl := range m.Placements() {
		out = append(out, module(m, pl.Node, pl.Module))
	}
	for _, p := range m.Persons {
		out = append(out, person(m, p))
	}
	for _, t := range m.Tokens {
		out = append(out, enrol(t.ID))
	}
	out = append(out, builder())
	for _, src := range m.Sources {
		out = append(out, sourceRepo(src.Name))
	}
	return out
}

// controller owns the control, node and build trees and the control
// account's JetStream API, and answers enrolments on the reply subject
// the request's payload names, which is an enrolment inbox (the control
// account exports those to the enrolment account), and a host's request
// for its modules' credentials on the reply the hosts' service import
// made for it, which only leads back to that host.
func controller() Principal {
	return Principal{
		User:    wire.ControllerUser,
		Account: wire.AccountControl,
		Kind:    wire.PrincipalController,
		Permissions: perms(
			[]string{
				wire.SubjectControlAll, wire.SubjectNodesAll, wire.SubjectBuildAll,
				wire.JetStreamAPI, wire.ConsumerAcks(wire.StreamControl, wire.ControlConsumer),
				wire.EnrolInboxes,
			},
			[]string{wire.Under(wire.ControllerInbox), wire.NodeAlive("*"), wire.SubjectCredentialsAll},
			// It answers a host's credential request on the reply the
			// server gave it through the hosts' service import.
			true,
		),
	}
}

// controllerMesh is the controller in the mesh account: it owns that
// account's JetStream API (EVENTS, DEAD, the modules' consumers), acks
// what it reads of EVENTS for its status, and alone may ask the
// provisioner tools, which retire and delete a consumer (ADR 0230). It
// alone may hear the server's advisories of deliveries a module's
// consumer terminated, each with the reader's reason (docs/events.md):
// the one account of a refusal outside the module. Only the server
// publishes there: no grant reaches $JS.EVENT, and the server refuses a
// reply aimed under $JS.
func controllerMesh(m *meshdesc.Mesh) Principal {
	pub := []string{wire.JetStreamAPI, wire.ConsumerAcks(wire.StreamEvents, wire.StatusConsumer)}
	for _, mod := range m.Modules {
		if len(mod.Provides) == 0 {
			continue
		}
		for _, t := range wire.ProvisionerTools {
			pub = append(pub, callGrant(mod.Name, t)...)
		}
	}
	return Principal{
		User:        wire.ControllerMeshUser,
		Account:     wire.AccountMesh,
		Kind:        wire.PrincipalController,
		Permissions: perms(pub, []string{wire.Under(wire.ControllerInbox), wire.TerminatedAdvisories}, false),
	}
}

// host may publish its own node's control subjects, nothing of another
// node, and hear its own inbox. It is in the hosts' account and reaches
// the control account through service imports alone (HostServices): the
// reply of every request it makes there is the server's, so no PubAck
// or answer of its can be aimed into a control stream. It serves
// nothing, so it has no allow_responses. It is not granted a
// core subscription on its declaration subject: whoever may subscribe a
// subject hears the controller's publishes on it with their reply
// subjects, and, granted allow_responses, could answer them with a forged
// PubAck before the stream did. A host reads NODES through JetStream.
//
// It may read the chunks of the artifacts its node is declared to install
// (docs/decisions/0006-builds-and-installation.md): a direct get of each
// chunk's subject, those artifacts' and no other's.
func host(m *meshdesc.Mesh, node string) Principal {
	// Its reports and heartbeats, and the one JetStream API subject that
	// answers with its own newest declaration.
	pub := []string{wire.NodeControl(node), wire.DirectGetLast(wire.StreamNodes, wire.NodeDeclare(node))}
	for _, pl := range m.Placements() {
		if pl.Node == node && pl.Module.Artifact != "" {
			pub = append(pub, wire.DirectGetLast(wire.StreamArtifacts, wire.ArtifactChunks(pl.Module.Artifact)))
		}
	}
	return Principal{
		User:        wire.HostUser(node),
		Account:     wire.AccountHosts,
		Kind:        wire.PrincipalHost,
		Node:        node,
		Permissions: perms(pub, []string{wire.Under(wire.HostInbox(node))}, false),
	}
}

// builder takes work from BUILDS through its own consumer, one build at a
// time, asks the repositories for the revisions it builds, stores the
// artifacts in ARTIFACTS and says what became of each build: nothing
// else of the control plane, no JetStream API but its consumer's.
func builder() Principal {
	return Principal{
		User:    wire.BuilderUser,
		Account: wire.AccountControl,
		Kind:    wire.PrincipalBuilder,
		Permissions: perms(
			[]string{
				wire.ConsumerInfo(wire.StreamBuilds, wire.BuildsConsumer),
				wire.ConsumerNext(wire.StreamBuilds, wire.BuildsConsumer),
				wire.ConsumerAcks(wire.StreamBuilds, wire.BuildsConsumer),
				wire.SubjectBuilt, wire.SubjectArtifactsAll, wire.SourceFetch("*"),
			},
			[]string{wire.Under(wire.BuilderInbox)},
			false,
		),
	}
}

// sourceRepo is a source repository: it announces its revisions and answers
// the builder's fetches of them, and nothing else. It is in the sources'
// account: its announcements reach CONTROL through a service import,
// with a reply the server made; the builder's fetches reach it as an
// imported stream, and it answers under the builder's inbox alone, the
// one subject of the control account it may publish on besides its
// announcements (through a service import too). It serves nothing by
// allow_responses: an answer elsewhere is refused by the server.
func sourceRepo(repo string) Principal {
	return Principal{
		User:    wire.SourceUser(repo),
		Account: wire.AccountSources,
		Kind:    wire.PrincipalSource,
		Name:    repo,
		Permissions: perms(
			[]string{wire.SourceChanged(repo), wire.Under(wire.BuilderInbox)},
			[]string{wire.SourceFetch(repo), wire.Under(wire.SourceInbox(repo))},
			false,
		),
	}
}

// module is one module on one node: publish its emits and the tools it
// uses; serve its tools; bind, fetch from and ack its own consumer only.
// What it consumes reaches it through that consumer, whose filters the
// controller sets; it is granted no core subscription on another
// module's events, which would let it hear their publishes with their
// reply subjects and, serving a tool (allow_responses), answer them with
// a forged PubAck.
func module(m *meshdesc.Mesh, node string, mod meshdesc.Module) Principal {
	var pub, sub []string
	for _, key := range mod.AllEmits() {
		pub = append(pub, wire.EventSubject(mod.Name, key))
	}
	pub = append(pub, toolGrants(m.ResolveTools(mod.Uses))...)
	if len(mod.Consumes) > 0 {
		c := wire.ModuleConsumer(node, mod.Name)
		pub = append(pub,
			wire.ConsumerInfo(wire.StreamEvents, c),
			wire.ConsumerNext(wire.StreamEvents, c),
			wire.ConsumerAcks(wire.StreamEvents, c),
		)
	}
	sub = append(sub, wire.Under(wire.ModuleInbox(node, mod.Name)))
	for _, tool := range mod.AllTools() {
		sub = append(sub, wire.ToolSubject(mod.Name, tool), wire.ToolAgainSubject(mod.Name, tool))
	}
	return Principal{
		User:        wire.ModuleUser(node, mod.Name),
		Account:     wire.AccountMesh,
		Kind:        wire.PrincipalModule,
		Node:        node,
		Module:      mod.Name,
		Permissions: perms(pub, sub, len(mod.AllTools()) > 0),
	}
}

// ConsumerFilters are the subject filters of a module's consumer, one per
// consumed pattern "<module>.<key pattern>".
func ConsumerFilters(mod meshdesc.Module) []string {
	var out []string
	for _, c := range mod.Consumes {
		source, pattern, _ := cut(c)
		out = append(out, wire.EventSubject(source, pattern))
	}
	return out
}

// person may call the tools it was issued, and nothing on control, nodes
// or builds. Every person may ask the catalogue (design 25 §7: its client
// lists the tools by asking it). "*" is every tool the manifests declare,
// resolved again by every composition, and never the provisioner tools
// (docs/decisions/0005-person-grants.md).
func person(m *meshdesc.Mesh, p meshdesc.Person) Principal {
	refs := m.ResolveTools(p.Tools)
	tools := []string{"*"}
	if !slices.Contains(p.Tools, "*") {
		tools = nil
		for _, r := range refs {
			tools = append(tools, r.Module+"."+r.Tool)
		}
	}
	if m.HasCatalogue() {
		refs = append(refs, meshdesc.ToolRef{Module: wire.CatalogSeat, Tool: wire.CatalogTool})
	}
	return Principal{
		User:        wire.PersonUser(p.Name),
		Account:     wire.AccountMesh,
		Kind:        wire.PrincipalPerson,
		Name:        p.Name,
		Permissions: perms(toolGrants(refs), []string{wire.Under(wire.PersonInbox(p.Name))}, false),
		Tools:       tools,
	}
}

// enrol may publish an enrolment request and hear its own inbox, nothing
// else: a leaked token is useless for anything but enrolling. It is in
// the enrolment account, which reaches CONTROL only through the service
// import of the enrolment subject (see Config).
func enrol(token string) Principal {
	return Principal{
		User:        wire.EnrolUser(token),
		Account:     wire.AccountEnrol,
		Kind:        wire.PrincipalEnrol,
		Name:        token,
		Permissions: perms([]string{wire.SubjectEnrol}, []string{wire.Under(wire.EnrolInbox(token))}, false),
	}
}

// toolGrants grants exactly the tools refs resolve to: ResolveTools has
// expanded every wildcard to declared tools, so a grant never reaches a
// tool nobody declared, nor the provisioner tools, which are the
// controller's alone.
func toolGrants(refs []meshdesc.ToolRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, callGrant(r.Module, r.Tool)...)
	}
	return out
}

// perms sorts and deduplicates, so that the rendered configuration does
// not depend on the order a manifest lists things in.
// callGrant is what calling a tool takes: its subject, and the subject a
// caller asks again on for an answer it has not heard (wire.ToolAgainSubject),
// which reaches only the runtimes serving that tool.
func callGrant(module, tool string) []string {
	return []string{wire.ToolSubject(module, tool), wire.ToolAgainSubject(module, tool)}
}

func perms(pub, sub []string, responses bool) Permissions {
	slices.Sort(pub)
	slices.Sort(sub)
	return Permissions{Publish: slices.Compact(pub), Subscribe: slices.Compact(sub), AllowResponses: responses}
}

func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
