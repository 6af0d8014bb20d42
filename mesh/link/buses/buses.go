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
// URL (no TLS) is AMQP's, and refused for a scoped principal by
// amqpconn.Dial (wire.Credential.ValidateFields) before anything is
// dialled.
func Of(c wire.Credential) (Bus, error) {
	switch c.Scheme() {
	case "tls", "nats":
		return NATS, nil
	case "amqp", "amqps":
		return AMQP, nil
	}
	if c.Scheme() == "" {
		// A URL that does not read has no scheme to name: say what is
		// wrong with it instead (without its password).
		if err := c.ValidateFields(); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("%w: scheme %q of the credential %s", plane.ErrUnsupported, c.Scheme(), wire.RedactURL(c.URL))
}

func isFingerprint(err error) bool { return errors.Is(err, link.ErrFingerprint) }

func isUnsupported(err error) bool { return errors.Is(err, plane.ErrUnsupported) }

// DialAgain reports whether a first connection that failed with err may
// succeed if tried again: anything but a server presenting another
// certificate, or a bus that cannot carry the principal. A refused login
// is tried again: the server refuses one for a moment while it reloads
// its configuration (an enrolment elsewhere in the mesh), and a user
// just composed may not be loaded yet.
func DialAgain(err error) bool {
	return err != nil && !errors.Is(err, link.ErrFingerprint) && !errors.Is(err, plane.ErrUnsupported)
}
