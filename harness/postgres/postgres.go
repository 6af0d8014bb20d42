// Package postgres runs PostgreSQL, the controller's store, for the
// harness and the tests, shaped like testcontainers-go's
// modules/postgres: Run applies this package's defaults first and the
// caller's options after, and returns the container even on error.
//
// The image is ours, mesh-postgres:local, built from Debian's postgresql
// package by harness/images (no registry is needed), or an official image
// (postgres:15) where one can be pulled: both read POSTGRES_USER,
// POSTGRES_PASSWORD and POSTGRES_DB at their first start.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/meshbus/mesh/harness/images"
)

// Port is PostgreSQL's port in the container, the one mapped to the host.
const Port = "5432/tcp"

// Defaults of the user, password and database Run makes. The user and
// database are those of the cluster our image carries, so that a
// container run for them starts from it rather than running initdb.
const (
	DefaultUsername = images.PostgresTemplateUser
	DefaultPassword = "mesh"
	DefaultDatabase = images.PostgresTemplateDatabase
)

// DefaultStartupTimeout bounds the wait for the server to take a
// connection. The Debian image initialises and starts in about three
// seconds on two cores; the margin is for a loaded machine.
const DefaultStartupTimeout = time.Minute

// ErrInvalidOption is a user, password or database Run cannot give the
// server; the error names it.
var ErrInvalidOption = errors.New("invalid postgres option")

// PostgresContainer is a running PostgreSQL container.
type PostgresContainer struct {
	*testcontainers.DockerContainer
	// Username, Password and Database are what the server was started with:
	// the user owns the database and may create others.
	Username string
	Password string
	Database string
}

// settings are what Options set.
type settings struct {
	user, password, database string
}

// Option configures the user and database the server is started with. It
// is a testcontainers.ContainerCustomizer, so it mixes with the generic
// customizers in Run's options.
type Option func(*settings)

// Customize does nothing: Run reads Options before it builds the request.
func (o Option) Customize(*testcontainers.GenericContainerRequest) error { return nil }

var _ testcontainers.ContainerCustomizer = Option(nil)

// WithUsername replaces the user (default mesh), the server's superuser.
func WithUsername(user string) Option { return func(s *settings) { s.user = user } }

// WithPassword replaces the user's password (default mesh).
func WithPassword(password string) Option { return func(s *settings) { s.password = password } }

// WithDatabase replaces the database made at the first start (default
// mesh).
func WithDatabase(db string) Option { return func(s *settings) { s.database = db } }

// check refuses what the images' first start would refuse, before a
// container is made.
func (s settings) check() error {
	for what, v := range map[string]string{"username": s.user, "database": s.database} {
		if v == "" {
			return fmt.Errorf("%w: empty %s", ErrInvalidOption, what)
		}
		for _, r := range v {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return fmt.Errorf("%w: %s %q: letters, digits, _ and - only", ErrInvalidOption, what, v)
			}
		}
	}
	if s.password == "" {
		return fmt.Errorf("%w: empty password (the server takes passwords only)", ErrInvalidOption)
	}
	return nil
}

// Run starts PostgreSQL from image and waits until the server takes a
// connection as the user to the database from this host. The port is
// published on the host's loopback only, on a port Docker chooses.
// Options of this package may be mixed with testcontainers-go
// customizers: labels, network aliases (network.WithNetworkName), log
// consumers. On error the container, if one was created, is returned too,
// so the caller can read its logs and remove it.
func Run(ctx context.Context, image string, opts ...testcontainers.ContainerCustomizer) (*PostgresContainer, error) {
	s := settings{user: DefaultUsername, password: DefaultPassword, database: DefaultDatabase}
	for _, o := range opts {
		if apply, ok := o.(Option); ok {
			apply(&s)
		}
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("run postgres: %w", err)
	}
	defaults := []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(Port),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort(Port): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
			}
		}),
		// A fast shutdown on docker stop, not SIGTERM's smart one that
		// waits for every client (a pool) to leave: the official image's
		// STOPSIGNAL, which ours cannot carry (images.Postgres).
		testcontainers.WithConfigModifier(func(c *container.Config) { c.StopSignal = "SIGINT" }),
		WithStartupTimeout(DefaultStartupTimeout),
	}
	// The environment comes from every option, so it is added after all
	// of them.
	env := testcontainers.WithEnv(map[string]string{
		"POSTGRES_USER": s.user, "POSTGRES_PASSWORD": s.password, "POSTGRES_DB": s.database,
	})
	all := append(append(defaults, opts...), env)
	ctr, err := testcontainers.Run(ctx, image, all...)
	var c *PostgresContainer
	if ctr != nil {
		c = &PostgresContainer{DockerContainer: ctr, Username: s.user, Password: s.password, Database: s.database}
	}
	if err != nil {
		return c, fmt.Errorf("run postgres: %w", err)
	}
	return c, nil
}

// WithStartupTimeout replaces the wait for readiness with one of timeout.
func WithStartupTimeout(timeout time.Duration) testcontainers.CustomizeRequestOption {
	return testcontainers.WithWaitStrategyAndDeadline(timeout, &connectable{timeout: timeout, poll: 250 * time.Millisecond})
}

// connectable waits until the server answers a query as the user, to the
// database, through the published port: a real connection, with the
// password. Not a log line: the official image logs "ready to accept
// connections" twice (a server for its first-start scripts on the socket
// alone, then the real one), ours once. Not testcontainers' port check:
// it dials the engine's gateway address, where a port published on the
// loopback alone does not answer.
type connectable struct {
	timeout time.Duration
	poll    time.Duration
}

var _ wait.StrategyTimeout = (*connectable)(nil)

// Timeout is the strategy's own deadline, read by testcontainers.
func (w *connectable) Timeout() *time.Duration { return &w.timeout }

// WaitUntilReady polls until a connection succeeds, the container stops
// running, or the timeout passes; the last connection error is in the
// error.
func (w *connectable) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	tick := time.NewTicker(w.poll)
	defer tick.Stop()
	var last error
	for {
		state, err := target.State(ctx)
		switch {
		case err != nil:
			last = fmt.Errorf("container state: %w", err)
		case !state.Running:
			return fmt.Errorf("wait for postgres: the container is %s (exit code %d)", state.Status, state.ExitCode)
		default:
			last = w.try(ctx, target)
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for postgres: not accepting a connection within %s: %w", w.timeout, last)
		case <-tick.C:
		}
	}
}

// try connects once and asks the server one query.
func (w *connectable) try(ctx context.Context, target wait.StrategyTarget) error {
	p, err := target.MappedPort(ctx, Port)
	if err != nil {
		return err
	}
	env, err := containerEnv(ctx, target)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, URL(net.JoinHostPort("127.0.0.1", p.Port()), env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DB"]))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// containerEnv reads the POSTGRES_ variables the container was made with:
// the strategy is given the target alone.
func containerEnv(ctx context.Context, target wait.StrategyTarget) (map[string]string, error) {
	ins, err := target.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	env := map[string]string{"POSTGRES_USER": "postgres"}
	if ins.Config != nil {
		for _, kv := range ins.Config.Env {
			for _, k := range []string{"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"} {
				if len(kv) > len(k) && kv[:len(k)+1] == k+"=" {
					env[k] = kv[len(k)+1:]
				}
			}
		}
	}
	if env["POSTGRES_DB"] == "" {
		env["POSTGRES_DB"] = env["POSTGRES_USER"]
	}
	return env, nil
}

// Address is host:port where PostgreSQL is reached from this host. Ask
// again after a restart: Docker may choose another port.
func (c *PostgresContainer) Address(ctx context.Context) (string, error) {
	p, err := c.MappedPort(ctx, Port)
	if err != nil {
		return "", fmt.Errorf("postgres address: %w", err)
	}
	return net.JoinHostPort("127.0.0.1", p.Port()), nil
}

// ConnectionString is the user's URL of the database from this host, with
// args (key=value, e.g. "application_name=test") added as parameters.
func (c *PostgresContainer) ConnectionString(ctx context.Context, args ...string) (string, error) {
	return c.ConnectionStringFor(ctx, c.Database, args...)
}

// ConnectionStringFor is the user's URL of another database db, one the
// user created, from this host.
func (c *PostgresContainer) ConnectionStringFor(ctx context.Context, db string, args ...string) (string, error) {
	addr, err := c.Address(ctx)
	if err != nil {
		return "", err
	}
	return URL(addr, c.Username, c.Password, db, args...), nil
}

// URL is the postgres:// URL of database db at addr (host:port) for user.
// TLS is off (sslmode=disable): the server has no certificate, and is
// reached on the loopback or a Docker network. args are key=value
// parameters added after it.
func URL(addr, user, password, db string, args ...string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: addr, Path: "/" + db}
	q := "sslmode=disable"
	for _, a := range args {
		q += "&" + a
	}
	u.RawQuery = q
	return u.String()
}
