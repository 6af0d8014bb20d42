package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/postgres"
	"github.com/meshbus/mesh/harness/topology"
)

// The controller's store, where the topology has one (topology.KindPostgres).
const (
	// AliasStore is the store's name on the private network.
	AliasStore = "store"
	// RoleStore is its container's role.
	RoleStore = "store"
	// storePort is PostgreSQL's port on the private network.
	storePort = "5432"
	// storeReadyLog is what PostgreSQL logs once it takes connections,
	// once per start of an initialised cluster: how a start after a stop
	// fault knows it is back.
	storeReadyLog = "database system is ready to accept connections"
)

// startStore raises the store before genesis, with a password made for
// this run, and keeps the URL every controller container is given
// (--store) on the private network. With the run's pool, the store is a
// recycled one when the pool has one (postgres.Reuse: its database new
// and empty, this password), else one started for the pool.
func (c *Cluster) startStore(ctx context.Context) error {
	password, err := newPassword()
	if err != nil {
		return err
	}
	ctr, err := c.recycledStore(ctx, password)
	if err != nil {
		return err
	}
	if ctr == nil {
		if ctr, err = c.bootStore(ctx, password); err != nil {
			return err
		}
	}
	c.store = ctr
	c.storeURL = postgres.URL(AliasStore+":"+storePort, ctr.Username, ctr.Password, ctr.Database)
	return nil
}

// bootStore starts a store of its own for the cluster, or for the run's
// pool, on the private network as AliasStore.
func (c *Cluster) bootStore(ctx context.Context, password string) (*postgres.PostgresContainer, error) {
	image, err := postgres.EnsureImage(ctx, c.s.builder, os.Getenv(postgres.EnvImage), images.DebianFromEnv(os.Getenv))
	if err != nil {
		return nil, infra("ensure the postgres image", err)
	}
	name, pooled := c.pooledOpts(RoleStore)
	opts := append(append(c.s.common(RoleStore), pooled...),
		postgres.WithPassword(password),
		network.WithNetworkName([]string{AliasStore}, c.networks[Private]),
		postgres.WithStartupTimeout(c.readyTimeout),
		// PostgreSQL runs as the image's own user: initdb refuses root,
		// and nothing of it is bound from this host.
		testcontainers.WithConfigModifier(func(cfg *container.Config) { cfg.User = "" }),
	)
	ctr, runErr := postgres.Run(ctx, image, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := c.s.adopt(ctx, RoleStore, storeReadyLog, c.readyTimeout, got, runErr)
	if ctr != nil {
		c.keepPooled(ctx, RoleStore, name, ctr, h, err)
	}
	if h != nil {
		c.setRole(RoleStore, h)
	}
	if err != nil {
		return nil, err
	}
	return ctr, nil
}

// recycledStore is a store of the run's pool, connected to the private
// network as AliasStore and given password (postgres.Reuse), or nil when
// the pool has none to give.
func (c *Cluster) recycledStore(ctx context.Context, password string) (*postgres.PostgresContainer, error) {
	m, err := c.leaseRecycled(ctx, RoleStore, AliasStore, storeReadyLog, c.readyTimeout, func(m recyclable) error {
		return m.(*postgres.PostgresContainer).Reuse(ctx, postgres.WithPassword(password))
	})
	if m == nil || err != nil {
		return nil, err
	}
	return m.(*postgres.PostgresContainer), nil
}

// QueryStore runs one SQL statement with psql inside the store's
// container, as the store's user on its database, and returns its rows,
// each a list of columns (unaligned, tab-separated). It reads the store
// itself, not what the controller says of it.
func (c *Cluster) QueryStore(ctx context.Context, sql string) ([][]string, error) {
	if c.store == nil {
		return nil, fmt.Errorf("query the store: %w: this cluster has no member of kind %s", ErrUnknownMember, topology.KindPostgres)
	}
	h, err := c.Handle(RoleStore)
	if err != nil {
		return nil, err
	}
	exit, out, err := h.Exec(ctx, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-F", "\t",
		"-U", c.store.Username, "-d", c.store.Database, "-c", sql)
	if err != nil {
		return nil, err
	}
	if exit != 0 {
		return nil, fmt.Errorf("query the store: psql exited %d: %s", exit, strings.TrimSpace(out))
	}
	var rows [][]string
	for line := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		if line != "" {
			rows = append(rows, strings.Split(line, "\t"))
		}
	}
	return rows, nil
}

// newPassword is 16 random bytes in hex: the store's password for one run.
func newPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make the store's password: %w", err)
	}
	return hex.EncodeToString(b), nil
}
