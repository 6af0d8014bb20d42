package wire

// The bus has one account; every principal is a user in it (design 25 §4).
const Account = "MESH"

// User names. Each principal's user name is derived from its identity,
// and so is its inbox prefix, so no user is ever granted _INBOX.>.
const (
	// ControllerUser is the controller's user.
	ControllerUser = "controller"
	inbox          = "_INBOX"
)

// HostUser is the user of the host agent on node.
func HostUser(node string) string { return "host." + node }

// ModuleUser is the user of module on node: one user per module per node.
func ModuleUser(node, module string) string { return "mod." + node + "." + module }

// PersonUser is the user of a person's client.
func PersonUser(person string) string { return "person." + person }

// EnrolUser is the user an enrolment token connects as.
func EnrolUser(token string) string { return "enrol." + token }

// ControllerInbox is the controller's inbox prefix.
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

// ReservedModuleNames are names a module may not take, because its inbox
// prefix _INBOX.<module>.<node> would then be another principal's.
var ReservedModuleNames = []string{"controller", "host", "person", "enrol"}

// AnyInbox matches every inbox: the grant nobody is given (design 25 §4).
const AnyInbox = inbox + ".>"
