// Package linktest is the contract every implementation of the control
// plane's seam (package plane) keeps, written once: natsplane's tests run
// it against the real nats-server in-process, amqpplane's against RabbitMQ
// in its container, with the same bodies. It says what the controller and
// the host may rely on whichever bus they are given (design 25 §1, §3);
// what an implementation does about its own bus's pitfalls its own tests
// say.
//
// A test body knows only the plane's interfaces and Bus, the fixture: what
// a body needs of one bus raised for it. What a bus may lack (an enrolment
// token issued live, an outage it can stage) is an optional interface the
// body asks for by type assertion, skipping with the capability's name.
package linktest

import (
	"testing"

	"github.com/meshbus/mesh/mesh/link/plane"
)

// Bus is one bus raised for one test, its objects asserted for a mesh of
// at least two nodes, everything it hands out closed when the test ends.
type Bus interface {
	// Nodes names two distinct nodes of the mesh, each with a host
	// credential.
	Nodes() (a, b string)
	// Controller is the controller connected as itself, with the bus's
	// objects asserted: the same one on every call.
	Controller() plane.Controller
	// Host is node's host connected as itself: a new connection on every
	// call, made while the bus is up.
	Host(node string) plane.Host
	// Builder is the builder connected as itself: a new connection on
	// every call, closed when the test ends (a body may close it first,
	// to have it die). The bodies give a second builder 2 s to take a
	// request the first holds: a fixture's ack wait (NATS) shorter than
	// that makes the wait show the implementation keeping the request
	// its taker's, not the ack wait.
	Builder() plane.Builder
	// Source is a source repository of the mesh connected as itself,
	// and its name: a new connection on every call.
	Source() (s plane.Source, repo string)
}

// Enrolling is a Bus that can issue an enrolment token live.
type Enrolling interface {
	// Enroller is the enrolment of a token the bus takes a login of,
	// and the token's id (what a claim names; its reply is the token's
	// own: plane.Answerer.CheckEnrolReply).
	Enroller() (e plane.Enroller, token string)
}

// Outage is a Bus that can go away and come back with what it held, on
// the same address: every connection made to it is cut, and those that
// reconnect by themselves (the controller's, a host's) do.
type Outage interface {
	// Away stops the bus; it returns once nothing can reach it.
	Away()
	// Back starts it again; it returns once it takes connections.
	Back()
}

// DeadLettering is a Bus on which a module's event can be made a dead
// letter.
type DeadLettering interface {
	// Poison has one module emit an event with id eventID and another's
	// consumer refuse each delivery of it until the bus gives up on it.
	// It returns the consumer's name as a dead letter names it, the
	// event's subject, and how many deliveries the bus made.
	Poison(eventID string) (consumer, subject string, deliveries int)
}

// Provisioning is a Bus with a provider module among its modules.
type Provisioning interface {
	// Provide has the provider emit, with its own credential, a
	// provisioner event of key (wire.EventProvisioner*) with id eventID
	// and body; it returns the event's subject once the bus holds it.
	Provide(key, eventID string, body []byte) (subject string)
}

// Run runs the contract as subtests of t, each on a bus raise makes for
// it.
func Run(t *testing.T, raise func(t *testing.T) Bus) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Bus)
	}{
		{"AHeldControlMessageComesAgainLaterWithoutHoldingUpTheNext", heldComesAgain},
		{"ADuplicateReportIsRecognisable", duplicateRecognisable},
		{"ANodesReportsComeInTheOrderSent", reportsInOrder},
		{"AHostGetsTheNewestDeclarationNeverAnOlder", newestOnly},
		{"ABuildGoesToOneBuilderAtATimeAndAgainWhenItDies", buildOneAtATime},
		{"AHeldBuildComesAgainNoSoonerAndATerminatedOneNever", buildHeldAndTerminated},
		{"AnOutcomeAndAnAnnouncementReachControlWithTheirIDs", outcomeAndAnnouncement},
		{"AHeldEnrolmentIsAnsweredOnTheReplyItNamed", heldEnrolmentAnswered},
		{"ReportsRefusedWhileTheBusWasAwayAreTakenOnceItIsBack", reportsAfterOutage},
		{"TheCredentialDeskAnswersOnlyTheNodeTheBusVouchesFor", credentialDesk},
		{"HeartbeatsAreHeardWithTheirNodeAndConnectedFollows", heartbeats},
		{"AnEventGivenUpOnIsADeadLetterInOrder", deadLetters},
		{"TheStatusFeedHandsTheProvidersStatusWordsInOrderOneAtATime", statusEvents},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, raise(t)) })
	}
}
