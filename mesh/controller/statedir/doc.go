// Package statedir names the files of the controller's state directory
// (Layout) and makes its writes durable. The file store keeps its state
// there, and the composition writes the files the bus reads (nats/,
// amqp/) there whichever store is kept: both go through this package.
package statedir
