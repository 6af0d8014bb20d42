package wire

import "time"

// The mesh's subject tree (design 25 §2 with design 19's module subjects,
// see ARCHITECTURE.md "Wire decisions").
const (
	// SubjectAll is the whole mesh tree.
	SubjectAll = "mesh.>"
	// SubjectControlAll is every control subject, the controller's own.
	SubjectControlAll = "mesh.control.>"
	// SubjectEnrol carries enrolment requests; the reply subject travels in
	// the payload (design 25 §2, §6).
	SubjectEnrol = "mesh.control.enrol"
	// SubjectBuilt carries a build's outcome.
	SubjectBuilt = "mesh.control.built"
	// SubjectPush carries an operator's push.
	SubjectPush = "mesh.control.push"
	// SubjectReports matches every node's report.
	SubjectReports = "mesh.control.*.report"
	// SubjectNodesAll is every node's declaration subject.
	SubjectNodesAll = "mesh.node.>"
	// SubjectBuildAll is the build tree.
	SubjectBuildAll = "mesh.build.>"
	// SubjectBuildRequest carries work for the build machine.
	SubjectBuildRequest = "mesh.build.request"
	// SubjectModuleEvents matches every module's events.
	SubjectModuleEvents = "mesh.mod.*.event.>"
	// SubjectSeatEvents matches every seat holder's events.
	SubjectSeatEvents = "mesh.seat.*.event.>"
)

// NodeReport is the subject a node reports on.
func NodeReport(node string) string { return "mesh.control." + node + ".report" }

// NodeCredentials is where a node's host asks the controller for the
// credentials of the modules declared to it (core request/reply: nothing
// of it is stored).
func NodeCredentials(node string) string { return "mesh.control." + node + ".credentials" }

// SubjectCredentialsAll matches every node's credential requests.
const SubjectCredentialsAll = "mesh.control.*.credentials"

// NodeAlive is a node's heartbeat subject, on core NATS only.
func NodeAlive(node string) string { return "mesh.control." + node + ".alive" }

// NodeControl is every control subject of one node, a host's publish grant.
func NodeControl(node string) string { return "mesh.control." + node + ".>" }

// NodeDeclare is the subject of a node's declaration, kept last-per-subject.
func NodeDeclare(node string) string { return "mesh.node." + node + ".declare" }

// EventSubject is the subject a module's event with key is emitted on.
func EventSubject(module, key string) string { return "mesh.mod." + module + ".event." + key }

// EventOf splits a module's event subject into the module and the key. It
// reports false for any other subject (EventKeyFromSubject says why).
func EventOf(subject string) (module, key string, ok bool) {
	module, key, err := EventKeyFromSubject(subject)
	return module, key, err == nil
}

// SeatEventSubject is the subject a seat holder's event is emitted on.
func SeatEventSubject(seat, verb string) string { return "mesh.seat." + seat + ".event." + verb }

// ToolSubject is the subject a module's tool is served on.
func ToolSubject(module, tool string) string { return "mesh.mod." + module + ".tool." + tool }

// ToolAgainSubject is where a caller asks again for the answer to a call
// of ToolSubject(module, tool) it has not heard, naming the same reply
// subject. Every runtime serving the tool hears it (no queue group); the
// one that answered that reply answers it again from what it kept, and
// the others stay silent, so a call asked again is never run twice. It
// exists because nats-server's configuration reload forgets every reply a
// responder was allowed to answer (allow_responses), and an answer
// crossing a reload is refused (docs/decisions/0015-answers-across-reloads.md);
// being asked again gives the responder a new grant for the same reply.
func ToolAgainSubject(module, tool string) string { return "mesh.mod." + module + ".again." + tool }

// AnswersKept is how long a runtime keeps a tool call's answer for a
// caller asking again: nats-server's default allow_responses expiry,
// after which the answer could not be sent anyway.
const AnswersKept = 2 * time.Minute

// ToolQueue is the queue group every runtime serving a tool joins, so that
// several runtimes compete for a call rather than each answering it.
func ToolQueue(module, tool string) string { return module + "." + tool }
