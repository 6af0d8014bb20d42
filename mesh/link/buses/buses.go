// Package buses picks a control-plane implementation (package plane) by a
// credential's scheme, as package sdk picks a module's binding: tls:// and
// nats:// are NATS (package natsplane), amqps:// AMQP (package amqpplane).
// It is the one package that links both in; the controller and the host
// import it and no bus library.
package buses

import (
	"errors"
	"fmt"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// Bus names a bus.
type Bus string

// The buses.
const (
	NATS Bus = "nats"
	AMQP Bus = "amqp"
)

// Of is the bus a credential is for, by its URL's scheme. An amqp://
// URL (no TLS) is refused for a scoped principal by
// wire.Credential.ValidateFields before it gets here.
func Of(c wire.Credential) (Bus, error) {
	switch c.Scheme() {
	case "tls", "nats":
		return NATS, nil
	case "amqp", "amqps":
		return AMQP, nil
	}
	return "", fmt.Errorf("%w: scheme %q of %s's credential", plane.ErrUnsupported, c.Scheme(), c.User())
}

func isFingerprint(err error) bool { return errors.Is(err, link.ErrFingerprint) }

func isUnsupported(err error) bool { return errors.Is(err, plane.ErrUnsupported) }
