// Package amqpplane is the control plane's AMQP implementation (package
// plane's interfaces) on RabbitMQ, through package amqpconn: the control
// plane in a virtual host of its own (wire.AMQPControlVhost,
// docs/decisions/0009), everything sent into it through the topic
// exchange wire.ExchangeControl with the wire subject as routing key, a
// bounded quorum queue per control subject, node.<node> holding a node's
// newest declaration, builds, and the answers in queues the controller
// alone writes and one principal alone reads (credentials.<node>,
// enrol.<token>): no answer travels by direct reply-to, whose address any
// writer of a default exchange can reach from any virtual host.
//
// What AMQP does not have, and how this package makes up for it:
//
//   - No delayed requeue: a held delivery is kept unsettled for its
//     delay and then requeued (amqpconn.Requeues); a controller that dies
//     meanwhile has it requeued by the broker at once.
//   - No positions and no duplicate window: a message's id
//     (message-id) is what the controller's ledger knows it by, so every
//     publish into the control plane carries one; Position is 0.
//   - No reading a queue without taking from it: a host's Newest takes
//     the declaration from node.<node> and gives it back at once (a
//     classic queue of one drops what is given back when a newer one
//     came); the controller also puts each node's declaration again
//     every ControllerOptions.ResendEvery.
package amqpplane
