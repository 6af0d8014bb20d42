package wire

// Stream names (design 25 §3). The controller is their only writer.
const (
	StreamControl = "CONTROL"
	StreamNodes   = "NODES"
	StreamBuilds  = "BUILDS"
	StreamEvents  = "EVENTS"
	StreamDead    = "DEAD"
)

// StreamAccount is the account a stream lives in: the control plane's
// streams in AccountControl, the modules' in AccountMesh.
func StreamAccount(stream string) string {
	switch stream {
	case StreamControl, StreamNodes, StreamBuilds, StreamArtifacts:
		return AccountControl
	}
	return AccountMesh
}

// Streams lists every stream the controller asserts, in creation order:
// DEAD first, because the max-deliveries advisory is only sent when
// something listens for it.
var Streams = []string{StreamDead, StreamControl, StreamNodes, StreamBuilds, StreamArtifacts, StreamEvents}

// DeadLetterAdvisories is what DEAD captures: the server's advisory for a
// message of EVENTS that exhausted its deliveries.
const DeadLetterAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + StreamEvents + ".*"

// ControlConsumer is the controller's durable consumer on CONTROL.
const ControlConsumer = "controller"

// StatusConsumer is the controller's durable consumer on EVENTS, filtered
// to the provisioner events its status is made of (ProvisionerStatusEvents).
// A module's consumer name always holds a '_' (ModuleConsumer), so the two
// cannot meet.
const StatusConsumer = "controller"

// BuildsConsumer is the builders' shared durable consumer on BUILDS.
const BuildsConsumer = "builder"

// ModuleConsumer is the durable consumer of a module on a node. A durable
// name may not contain a dot, so the two names are joined by '_' (design
// 19 "Verified, and it is a trap").
func ModuleConsumer(node, module string) string { return node + "_" + module }

// ConsumerInfo is the JetStream API subject that reads one consumer's info;
// binding a consumer with nats.go always sends it.
func ConsumerInfo(stream, consumer string) string {
	return "$JS.API.CONSUMER.INFO." + stream + "." + consumer
}

// ConsumerNext is the JetStream API subject a pull request is sent to.
func ConsumerNext(stream, consumer string) string {
	return "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer
}

// ConsumerAcks matches every ack subject of one consumer's deliveries.
func ConsumerAcks(stream, consumer string) string {
	return "$JS.ACK." + stream + "." + consumer + ".>"
}

// JetStreamAPI is the whole JetStream API, the controller's alone.
const JetStreamAPI = "$JS.API.>"

// TerminatedAdvisories is the server's advisory for a message of EVENTS
// that a consumer terminated (a reader refusing it for good, with
// RefusalReason), one subject per consumer under it. The server sends it
// only while someone listens, and only the controller's user in the mesh
// account may.
const TerminatedAdvisories = terminatedAdvisory + StreamEvents + ".*"

const terminatedAdvisory = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED."

// TerminatedAdvisory is the subject of consumer's MSG_TERMINATED
// advisories on EVENTS.
func TerminatedAdvisory(consumer string) string {
	return TerminatedAdvisoryOn(StreamEvents, consumer)
}

// TerminatedAdvisoryOn is the subject of the MSG_TERMINATED advisories of
// consumer on stream.
func TerminatedAdvisoryOn(stream, consumer string) string {
	return terminatedAdvisory + stream + "." + consumer
}

// DirectGetLast is the JetStream API subject that answers with the last
// message stream holds on subject (the stream allows direct gets): how a
// host reads its newest declaration, granted for its own subject alone.
func DirectGetLast(stream, subject string) string {
	return "$JS.API.DIRECT.GET." + stream + "." + subject
}

// StreamSubjects are the subjects stream captures: the one table the
// controller creates the streams from and the reply-injection checks aim
// at (observe.ControlTargets), so that a stream added here is both
// created and aimed at.
func StreamSubjects(stream string) []string {
	switch stream {
	case StreamDead:
		return []string{DeadLetterAdvisories}
	case StreamControl:
		// mesh.control.> but the heartbeats and the credential requests,
		// which stay on core NATS.
		return []string{SubjectReports, SubjectEnrol, SubjectBuilt, SubjectPush, SubjectSourceChanges}
	case StreamNodes:
		return []string{SubjectNodesAll}
	case StreamBuilds:
		return []string{SubjectBuildAll}
	case StreamArtifacts:
		return []string{SubjectArtifactsAll}
	case StreamEvents:
		return []string{SubjectModuleEvents, SubjectSeatEvents}
	}
	return nil
}

// DirectGetAll matches every direct get of stream: what AccountControl
// exports to AccountHosts for NODES and ARTIFACTS, each host's own
// grant narrowing it to its declaration and its artifacts.
func DirectGetAll(stream string) string { return "$JS.API.DIRECT.GET." + stream + ".>" }
