package rabbitmq

import (
	"errors"

	"github.com/testcontainers/testcontainers-go"
)

// DefaultAdminUsername is the administrator's name unless WithAdmin gives
// another. Its password is never a default: guest/guest, as the official
// image has it, would let any container of the private network administer
// the broker through its management API (every module runs on that
// network), so each Run mints one (RabbitMQContainer.AdminPassword).
const DefaultAdminUsername = "mesh-admin"

// Errors callers branch on.
var (
	// ErrInvalidOption is a user, virtual host, permission or setting Run
	// cannot load; the error names it.
	ErrInvalidOption = errors.New("invalid rabbitmq option")
	// ErrUnknownUser is asked for a user no option gave.
	ErrUnknownUser = errors.New("unknown rabbitmq user")
)

// Option configures what RabbitMQ loads at boot. It is a
// testcontainers.ContainerCustomizer, so it mixes with the generic
// customizers in Run's options.
type Option func(*settings)

// Customize does nothing: Run reads Options before it builds the request.
func (o Option) Customize(*testcontainers.GenericContainerRequest) error { return nil }

var _ testcontainers.ContainerCustomizer = Option(nil)

// WithAdmin replaces the administrator (default DefaultAdminUsername with
// a password minted for the run). It is
// created at boot with the tag administrator and every permission on
// every virtual host.
func WithAdmin(name, password string) Option {
	return func(s *settings) { s.admin = user{name: name, password: password, tags: []string{"administrator"}} }
}

// WithUser adds a user with password and tags (none: an ordinary client).
// It has no permission until WithPermissions gives one.
func WithUser(name, password string, tags ...string) Option {
	return func(s *settings) { s.users = append(s.users, user{name: name, password: password, tags: tags}) }
}

// WithVhost adds a virtual host; "/" always exists.
func WithVhost(name string) Option {
	return func(s *settings) { s.vhosts = append(s.vhosts, name) }
}

// WithPermissions gives user on vhost the three regular expressions of
// RabbitMQ's permissions (an empty one grants nothing).
func WithPermissions(user, vhost, configure, write, read string) Option {
	return func(s *settings) {
		s.perms = append(s.perms, permission{User: user, Vhost: vhost, Configure: configure, Write: write, Read: read})
	}
}

// WithConfig adds lines to the rabbitmq.conf fragment Run writes, after
// its own, e.g. "heartbeat = 10".
func WithConfig(lines ...string) Option {
	return func(s *settings) { s.config = append(s.config, lines...) }
}
