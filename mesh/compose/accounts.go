package compose

import "github.com/meshbus/mesh/mesh/wire"

// Limits bound what each account may hold, so that no principal can fill
// the bus's disk (a leaked token, a module flooding EVENTS through the
// server's own replies). The controller's stream policy must fit inside
// them; its tests hold it to that.
type Limits struct {
	// ControlFile and MeshFile bound the JetStream file store of the
	// control and mesh accounts, all their streams together.
	ControlFile, MeshFile int64
	// ControlStreams and MeshStreams are how many streams each may hold.
	ControlStreams, MeshStreams int
	// The enrolment account's connections are bounded by
	// EnrolConnectionsPerToken for each token outstanding (a claim's
	// connection and a retry's), and by EnrolConnectionsMin at least; a
	// leaked token may open that many, and send requests EnrolPayload
	// large, and no more. The bound grows with the tokens because
	// nats-server, reloading while an account is at its connection limit
	// and more clients are logging in, closes connections already
	// established in it ("maximum account active connections exceeded",
	// seen at 1 of 60 held connections in 20 reloads): a fleet enrolling
	// at once under a fixed bound of 64 lost claims that way
	// (docs/living-mesh.md, "Scale").
	EnrolConnectionsPerToken, EnrolConnectionsMin, EnrolPayload int
}

// DefaultLimits are the limits the configuration is composed with.
func DefaultLimits() Limits {
	return Limits{
		ControlFile:              1 << 30,
		MeshFile:                 2 << 30,
		ControlStreams:           4,
		MeshStreams:              2,
		EnrolConnectionsPerToken: 4,
		EnrolConnectionsMin:      64,
		EnrolPayload:             64 << 10,
	}
}

// HostServices are what the control account exports to the hosts'
// account as services: a host's reports, heartbeats and credential
// requests, and the direct gets of NODES and ARTIFACTS. Each host's own
// grant narrows them to its node's subjects and artifacts. Through a
// service import the server gives every request a reply of its own, so
// a host's PubAck or answer comes back to it, whatever reply it named,
// and never lands in a control stream (docs/decisions/0007).
var HostServices = []string{
	wire.SubjectReports, wire.NodeAlive("*"), wire.SubjectCredentialsAll,
	wire.DirectGetAll(wire.StreamNodes), wire.DirectGetAll(wire.StreamArtifacts),
}

// SourceServices are what the control account exports to the sources'
// account as services: a repository's announcements, and the builder's
// inboxes, where a repository answers a fetch. The fetches themselves
// cross the other way as a stream export: the control account imports
// nothing, since a reload that changes an account's imports leaves it a
// moment without its JetStream API import ("no responders", seen once in
// ten controller tests when the control account imported the fetch
// subject as a service).
var SourceServices = []string{wire.SubjectSourceChanges, wire.Under(wire.BuilderInbox)}

// accounts lays the principals' users out in the accounts of
// docs/decisions/0001-accounts.md and 0007. The hosts and the source
// repositories reach the control account through service imports alone
// (HostServices and SourceServices; the builder's fetches reach the
// repositories as an exported stream). The control account exports
// two things to the enrolment account:
//   - the enrolment subject, as a service: the server gives the request a
//     reply subject of its own (_R_…) in the control account, so CONTROL's
//     PubAck goes back to the requester in the enrolment account, whatever
//     reply the request named, and never onto a control subject;
//   - the enrolment inboxes, as a stream: the controller's answer,
//     published in the control account on the reply subject the request's
//     payload names, is heard there by the token's own user.
//
// The enrolment account has no JetStream: no API answers, no stream
// writes. It is composed with its imports even while no token is
// outstanding, with no users: an import added by a reload does not route
// requests into CONTROL, whose stream was made before it (see
// docs/decisions/0003-enrolment-account-from-genesis.md), so the first
// token issued after a genesis without tokens must find the account
// already there. An account without users lets nobody in.
func accounts(users map[string][]user, l Limits) map[string]account {
	out := map[string]account{
		wire.AccountControl: {
			JetStream: &jsLimits{MaxFile: l.ControlFile, MaxStreams: l.ControlStreams, MaxBytesRequired: true},
			Users:     users[wire.AccountControl],
		},
		wire.AccountMesh: {
			JetStream: &jsLimits{MaxFile: l.MeshFile, MaxStreams: l.MeshStreams, MaxBytesRequired: true},
			Users:     users[wire.AccountMesh],
		},
	}
	ctl := out[wire.AccountControl]
	ctl.Exports = []export{
		{Service: wire.SubjectEnrol, Accounts: []string{wire.AccountEnrol}},
		{Stream: wire.EnrolInboxes, Accounts: []string{wire.AccountEnrol}},
	}
	hosts := account{Users: users[wire.AccountHosts]}
	for _, s := range HostServices {
		ctl.Exports = append(ctl.Exports, export{Service: s, Accounts: []string{wire.AccountHosts}})
		hosts.Imports = append(hosts.Imports, imp{Service: &source{Account: wire.AccountControl, Subject: s}})
	}
	sources := account{Users: users[wire.AccountSources]}
	for _, s := range SourceServices {
		ctl.Exports = append(ctl.Exports, export{Service: s, Accounts: []string{wire.AccountSources}})
		sources.Imports = append(sources.Imports, imp{Service: &source{Account: wire.AccountControl, Subject: s}})
	}
	ctl.Exports = append(ctl.Exports, export{Stream: wire.SourceFetch("*"), Accounts: []string{wire.AccountSources}})
	sources.Imports = append(sources.Imports, imp{Stream: &source{Account: wire.AccountControl, Subject: wire.SourceFetch("*")}})
	out[wire.AccountControl] = ctl
	out[wire.AccountHosts] = hosts
	out[wire.AccountSources] = sources
	out[wire.AccountEnrol] = account{
		Limits: &accountLimit{MaxConnections: max(l.EnrolConnectionsMin, l.EnrolConnectionsPerToken*len(users[wire.AccountEnrol])), MaxPayload: l.EnrolPayload},
		Users:  users[wire.AccountEnrol],
		Imports: []imp{
			{Service: &source{Account: wire.AccountControl, Subject: wire.SubjectEnrol}},
			{Stream: &source{Account: wire.AccountControl, Subject: wire.EnrolInboxes}},
		},
	}
	return out
}
