package natsplane

import (
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// JetStreams are the controller's JetStream contexts by account
// (wire.Account*): its streams live in two accounts, and each is reached
// through the controller's user in that account.
type JetStreams map[string]jetstream.JetStream

// For is the context the stream is reached through.
func (j JetStreams) For(stream string) (jetstream.JetStream, error) {
	acct := wire.StreamAccount(stream)
	js, ok := j[acct]
	if !ok {
		return nil, fmt.Errorf("stream %s: no connection to account %s", stream, acct)
	}
	return js, nil
}
