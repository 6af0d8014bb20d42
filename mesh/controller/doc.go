// Package controller runs the production controller: Run and Start wire
// the packages below it, each of which imports only those under it.
//
//   - status: the followers that fold what the bus says into the store
//     (provisioner events, dead letters, heartbeats) and read it back per
//     node.
//   - control: the CONTROL loop and its handlers (enrolment, push,
//     reports, builds), its ledger and composer, and the credential desk.
//   - rollout: composition and rollout: genesis, apply, tokens, persons,
//     pushes, the nodes' signed declarations, the AMQP broker's files.
//   - store: the controller's state behind Store, every record it holds,
//     and its first implementation, the state directory (FileStore);
//     pgstore keeps it in PostgreSQL, storetest is the contract both keep.
//   - statedir: the state directory's layout (Layout) and durable writes;
//     what the nats container reads stays files in its nats/ whichever
//     store is kept.
package controller
