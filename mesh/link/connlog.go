package link

import (
	"log/slog"

	"github.com/nats-io/nats.go"
)

// WithConnectionLog logs on log when the connection is lost and when it
// is back: a long-lived program (the host) says so, while the link
// reconnects by itself.
func WithConnectionLog(log *slog.Logger) Option {
	natsOpts := WithNATSOptions(
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("disconnected", "err", err) }),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("reconnected") }),
	)
	return func(o *options) {
		o.log = log
		natsOpts(o)
	}
}
