package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// Sentinel errors callers branch on.
var (
	// ErrFingerprint means the bus presented a certificate other than the
	// pinned one.
	ErrFingerprint = errors.New("server certificate does not match the pinned fingerprint")
	// ErrBootstrap means a bootstrap URL was dialled as if it were a
	// scoped credential.
	ErrBootstrap = errors.New("a bootstrap URL is not an ordinary credential")
)

// DefaultTimeout bounds a dial whose context has no deadline.
const DefaultTimeout = 10 * time.Second

type options struct {
	address    string
	name       string
	log        *slog.Logger
	errHandler nats.ErrHandler
	extra      []nats.Option
}

// Option changes how Dial connects.
type Option func(*options)

// Common is what every binding reads of the options, whatever its bus
// (the NATS-only ones aside): the address to dial instead of the
// credential's, the connection's name, the logger of its losses.
type Common struct {
	Address, Name string
	Logger        *slog.Logger
}

// CommonOf reads opts for a binding other than NATS's.
func CommonOf(opts ...Option) Common {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return Common{Address: o.address, Name: o.name, Logger: o.log}
}

// WithAddress dials host:port instead of the credential URL's, while the
// certificate is still checked against the credential's host name: a test
// host reaching the bus through a mapped port is still talking to "nats".
func WithAddress(hostport string) Option { return func(o *options) { o.address = hostport } }

// WithName sets the connection name the server shows in its monitoring.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithErrorHandler receives asynchronous errors, such as a permissions
// violation the server reports after a publish or subscribe.
func WithErrorHandler(h nats.ErrHandler) Option { return func(o *options) { o.errHandler = h } }

// WithNATSOptions appends raw nats.go options, applied last.
func WithNATSOptions(opts ...nats.Option) Option {
	return func(o *options) { o.extra = append(o.extra, opts...) }
}

// Dial connects to the bus as the credential's principal. The credential
// is checked field by field (wire.Credential.ValidateFields); whether its
// user is the one its identity derives is the server's to judge. No error
// carries the credential's password.
func Dial(ctx context.Context, cred wire.Credential, opts ...Option) (*nats.Conn, error) {
	if cred.Bootstrap {
		return nil, ErrBootstrap
	}
	if err := cred.ValidateFields(); err != nil {
		return nil, fmt.Errorf("dial bus: %w", err)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	address := cred.HostPort()
	if o.address != "" {
		address = o.address
	}
	user := cred.User()
	timeout := DefaultTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("dial bus: %w", context.DeadlineExceeded)
	}
	name := o.name
	if name == "" {
		name = user
	}
	natsOpts := []nats.Option{
		nats.Name(name),
		nats.UserInfo(user, cred.Password()),
		nats.Secure(PinnedTLS(cred.Fingerprint, cred.Host())),
		nats.Timeout(timeout),
		nats.CustomInboxPrefix(cred.Inbox()),
	}
	if o.errHandler != nil {
		natsOpts = append(natsOpts, nats.ErrorHandler(o.errHandler))
	}
	natsOpts = append(natsOpts, o.extra...)

	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect("tls://"+address, natsOpts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("dial bus at %s as %s: %w", address, user, r.err)
		}
		return r.nc, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		// Said so: a credential for the other bus (an AMQP broker
		// answers NATS's client with silence) ends here too.
		return nil, fmt.Errorf("dial bus at %s as %s: no NATS server answered in time: %w", address, user, ctx.Err())
	}
}

// PinnedTLS is the client TLS configuration of design 19: no authority is
// trusted; the leaf certificate must have the pinned fingerprint AND carry
// serverName. Both checks run on every handshake, reconnects included.
func PinnedTLS(fingerprint, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		// Verification is not skipped: VerifyConnection below replaces the
		// authority check with the pin, and keeps the name check.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("server presented no certificate")
			}
			leaf := cs.PeerCertificates[0]
			if got := pki.FingerprintDER(leaf.Raw); got != fingerprint {
				return fmt.Errorf("%w: pinned %s, presented %s", ErrFingerprint, short(fingerprint), short(got))
			}
			return verifyName(leaf, serverName)
		},
	}
}

func verifyName(leaf *x509.Certificate, serverName string) error {
	host := serverName
	if h, _, err := net.SplitHostPort(serverName); err == nil {
		host = h
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Errorf("server certificate name: %w", err)
	}
	return nil
}

func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16] + "…"
	}
	return fp
}

// HostPort joins a host and a port the way a bus URL carries them.
func HostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
