// Package rollout composes the mesh and rolls it out: genesis (TLS
// material, minted passwords, the composed nats-server configuration and
// every principal's credential document), apply (recomposing after the
// description changed, keeping what still exists), enrolment tokens,
// persons, pushes of a new description, the nodes' signed declarations
// and their guard, and the AMQP broker's definitions. Each change is one
// store update, then made live in nats.conf under the state directory's
// composition lock.
package rollout
