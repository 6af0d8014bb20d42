package rabbitmq

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/testcontainers/testcontainers-go"
)

// ErrNotReusable is a broker Reuse cannot give the settings asked for: it
// booted with another configuration (which the node reads only at boot),
// or it has no erl_call to be asked through.
var ErrNotReusable = errors.New("broker not reusable")

// Recycle stops the broker's applications and resets its node, as
// rabbitmqctl stop_app and reset do: every user, virtual host,
// permission, queue and its messages, exchange, binding, parameter and
// policy is gone, its connections closed, its listeners stopped. The
// Erlang VM keeps running with its modules loaded, which is what Reuse
// saves: a boot takes this image about 6.5 core-seconds and 9 s (the VM,
// then loading every module of every application), a recycled broker's
// start under a core-second (docs/decisions/0014, ninth stop).
func (c *RabbitMQContainer) Recycle(ctx context.Context) error {
	if _, err := c.evalJSON(ctx, "ok = rabbit:stop(), ok = rabbit_mnesia:reset(), true"); err != nil {
		if errors.Is(err, errNoErlCall) {
			return fmt.Errorf("recycle: %w: %w", ErrNotReusable, err)
		}
		return fmt.Errorf("recycle: %w", err)
	}
	return nil
}

// Reuse starts a recycled broker again as though Run had started it with
// opts (WithUser, WithVhost, WithPermissions, WithConfig; the
// administrator stays the broker's own) and the files given, which are
// written first (a certificate, a key, definitions of the caller's): the
// node reads its definitions file again as it starts, and the TLS
// listener the certificate and key (ssl:clear_pem_cache, since Erlang's
// ssl keeps the files it read). The configuration opts render must be
// the one the broker booted with, or Reuse fails with ErrNotReusable and
// changes nothing.
func (c *RabbitMQContainer) Reuse(ctx context.Context, files []testcontainers.ContainerFile, opts ...Option) error {
	s := defaultSettings()
	for _, o := range opts {
		o(&s)
	}
	s.admin.name, s.admin.password = c.AdminUsername, c.AdminPassword
	conf, defs, err := s.render()
	if err != nil {
		return fmt.Errorf("reuse rabbitmq: %w", err)
	}
	if !bytes.Equal(conf, c.conf) {
		return fmt.Errorf("reuse rabbitmq: %w: it booted with another configuration", ErrNotReusable)
	}
	files = append(files, testcontainers.ContainerFile{Reader: bytes.NewReader(defs), ContainerFilePath: DefinitionsFile, FileMode: 0o644})
	for _, f := range files {
		var b bytes.Buffer
		if _, err := b.ReadFrom(f.Reader); err != nil {
			return fmt.Errorf("reuse rabbitmq: read %s: %w", f.ContainerFilePath, err)
		}
		if err := c.CopyToContainer(ctx, b.Bytes(), f.ContainerFilePath, f.FileMode); err != nil {
			return fmt.Errorf("reuse rabbitmq: write %s: %w", f.ContainerFilePath, err)
		}
	}
	if _, err := c.evalJSON(ctx, "ssl:clear_pem_cache(), ok = rabbit:start(), true"); err != nil {
		return fmt.Errorf("reuse rabbitmq: start: %w", err)
	}
	c.passwords = s.passwords()
	return nil
}
