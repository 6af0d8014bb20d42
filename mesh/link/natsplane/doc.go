// Package natsplane is the control plane's NATS implementation (package
// plane's interfaces) on nats.go and its jetstream package: CONTROL,
// NODES, BUILDS and ARTIFACTS in the control account, EVENTS and DEAD in
// the mesh account, the hosts and the enrolment tokens reaching CONTROL
// through service imports (docs/decisions/0001, 0007).
//
// Host and enrolment: host.go, enrol.go. The controller: controller.go
// and the files named after its roles.
package natsplane
