// Package controller is the production controller's foundation: genesis
// (TLS material, minted passwords, the composed nats-server configuration
// and every principal's credential document), apply (recomposing after the
// description changed, keeping what still exists) and the assertion of the
// streams and consumers of design 25 §3, idempotently on every start,
// correcting drift the server can update and refusing drift it cannot.
//
// The controller's own state is kept behind Store (store.go), whose first
// implementation is the state directory (FileStore); what the nats
// container reads stays files in the state directory's nats/ (Layout).
package controller
