// Package control is the controller's CONTROL loop (FollowControl) and
// its handlers: enrolment (Enrol), pushes, reports (TakeReport), builds
// (AskBuild, RecordBuilt), the ledger that applies each message once
// (AtSequence, PruneLedger), the composer that makes what they changed
// live, and the desk that hands a node its modules' credentials
// (AnswerCredentials).
package control
