package wire

import "strings"

// The bus's accounts. Design 25 §4 had one; docs/decisions/0001 and 0007
// say why there are five: within one account a reply subject is a
// capability the server never checks (a responder's answer, a JetStream
// API status and every stream's PubAck go wherever the sender's reply
// names), so the control plane's streams live in an account whose only
// users are the controller and the builder, its writers. Everyone else
// who must reach it (hosts, source repositories, enrolment tokens) is a
// user of an account of its own kind, and reaches it through service
// imports, on the way through which the server replaces the request's
// reply subject with one of its own (_R_.…): an answer or a PubAck goes
// back to the requester, whatever reply the request named.
const (
	// AccountControl holds the control plane: the controller's user and
	// the builder's, and the streams CONTROL, NODES, BUILDS and ARTIFACTS.
	AccountControl = "CONTROL"
	// AccountHosts holds the hosts' users and nothing else: no JetStream.
	// It imports from AccountControl the services a host uses: its
	// reports, heartbeats and credential requests, and the direct gets
	// of its declaration and its artifacts' chunks.
	AccountHosts = "HOSTS"
	// AccountSources holds the source repositories' users and nothing
	// else: no JetStream. It imports their announcements into CONTROL, and
	// exports their fetch subjects, which AccountControl imports for the
	// builder.
	AccountSources = "SOURCES"
	// AccountMesh holds what modules and persons share: EVENTS, DEAD and
	// the tools, and the controller's second user for them.
	AccountMesh = "MESH"
	// AccountEnrol holds the enrolment users and nothing else: no
	// JetStream, no other user. Its one way in is the service import of
	// SubjectEnrol from AccountControl, through which the server replaces
	// a request's reply subject with one of its own, so a PubAck returns
	// here, where no stream listens, whatever the request named.
	AccountEnrol = "ENROL"
)

// User names. Each principal's user name is derived from its identity,
// and so is its inbox prefix, so no user is ever granted _INBOX.>.
const (
	// ControllerUser is the controller's user in AccountControl.
	ControllerUser = "controller"
	// ControllerMeshUser is the controller's user in AccountMesh: it
	// asserts EVENTS and DEAD and the modules' consumers, folds the
	// provisioner words into its status and asks the provisioner tools.
	ControllerMeshUser = "controller.mesh"
	inbox              = "_INBOX"
)

// HostUser is the user of the host agent on node.
func HostUser(node string) string { return "host." + node }

// ModuleUser is the user of module on node: one user per module per node.
func ModuleUser(node, module string) string { return "mod." + node + "." + module }

// PersonUser is the user of a person's client.
func PersonUser(person string) string { return "person." + person }

// EnrolUser is the user an enrolment token connects as.
func EnrolUser(token string) string { return "enrol." + token }

// ControllerInbox is the controller's inbox prefix, in both its accounts.
const ControllerInbox = inbox + ".controller"

// ModuleInbox is the inbox prefix of module on node (no trailing dot, no
// wildcard: the form nats.CustomInboxPrefix takes).
func ModuleInbox(node, module string) string { return inbox + "." + module + "." + node }

// HostInbox is the inbox prefix of the host on node.
func HostInbox(node string) string { return inbox + ".host." + node }

// PersonInbox is the inbox prefix of a person.
func PersonInbox(person string) string { return inbox + ".person." + person }

// EnrolInbox is the inbox prefix of an enrolment token.
func EnrolInbox(token string) string { return inbox + ".enrol." + token }

// EnrolInboxes matches every enrolment inbox: the controller answers an
// enrolment on the reply subject the request names in its payload.
const EnrolInboxes = inbox + ".enrol.>"

// Under turns an inbox prefix into the subscription pattern covering it.
func Under(prefix string) string { return prefix + ".>" }

// ReservedModuleNames are names a module may not take: its inbox prefix
// _INBOX.<module>.<node> would then be another principal's (controller,
// host, person, enrol), or a host would run it from its own entries of
// its programs directory (default, the program of a module with none of
// its own; mesh-host, the host itself in the beds' image).
var ReservedModuleNames = []string{"controller", "host", "person", "enrol", "default", "mesh-host"}

// AnyInbox matches every inbox: the grant nobody is given (design 25 §4).
const AnyInbox = inbox + ".>"

// HostNode is the node whose host user is user (HostUser's inverse).
func HostNode(user string) (node string, ok bool) {
	node, ok = strings.CutPrefix(user, "host.")
	return node, ok && CheckName(node) == nil
}
