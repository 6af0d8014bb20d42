package wire

import "crypto/rand"

// NewID is a fresh message id (a report's, a push's, a claim's): 26
// random base32 characters, unique without coordination, and a valid
// NATS Nats-Msg-Id and AMQP message-id alike.
func NewID() string { return rand.Text() }
