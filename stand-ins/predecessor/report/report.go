// Package report is what the predecessor stand-in serves about itself:
// everything its client could notice, counted. The stand-in writes it
// and observe's witness reads it, so its shape is spelled once, here.
package report

import "time"

// Path is where the stand-in serves its Counts as JSON, on its HTTP port.
const Path = "/counts"

// Counts is the predecessor's own view of its life on the broker.
type Counts struct {
	// Name is the connection name it gives the broker
	// (connection_name, the client-provided name).
	Name string `json:"name"`
	// User and Vhost are its own, never the mesh's.
	User  string `json:"user"`
	Vhost string `json:"vhost"`
	// Started is when the stand-in started.
	Started time.Time `json:"started"`

	// Sent messages were published; Confirmed and Nacked are the broker's
	// answers to them (publisher confirms), Returned the mandatory
	// publishes the broker could not route.
	Sent      uint64 `json:"sent"`
	Confirmed uint64 `json:"confirmed"`
	Nacked    uint64 `json:"nacked"`
	Returned  uint64 `json:"returned"`
	// Received counts each sequence number consumed back once;
	// Duplicated a sequence number received again; Lost a sequence number
	// below the highest received that never arrived (a gap).
	Received   uint64 `json:"received"`
	Duplicated uint64 `json:"duplicated"`
	Lost       uint64 `json:"lost"`
	// Highest is the highest sequence number received.
	Highest uint64 `json:"highest"`

	// Calls were asked of its own responder through direct reply-to;
	// Answered came back within the call timeout, TimedOut did not.
	Calls    uint64 `json:"calls"`
	Answered uint64 `json:"answered"`
	TimedOut uint64 `json:"timed_out"`

	// Connections are every connection it opened, oldest first: one for
	// its whole life unless the broker closed one.
	Connections []Connection `json:"connections"`
	// Disconnects are every connection that ended while it meant to go on,
	// with the broker's reason.
	Disconnects []Disconnect `json:"disconnects"`
}

// Connection is one connection the stand-in opened.
type Connection struct {
	At time.Time `json:"at"`
	// LocalPort is its end's port: the broker's peer_port for it.
	LocalPort int `json:"local_port"`
}

// Disconnect is a connection that ended: the broker's code and reason
// (AMQP's connection.close), or the transport's error with code 0.
type Disconnect struct {
	At     time.Time `json:"at"`
	Code   int       `json:"code"`
	Reason string    `json:"reason"`
}
