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
// (--store) on the private network.
func (c *Cluster) startStore(ctx context.Context, m topology.Member) error {
	image, err := postgres.EnsureImage(ctx, c.s.builder, os.Getenv(postgres.EnvImage), images.DebianFromEnv(os.Getenv))
	if err != nil {
		return infra("ensure the postgres image", err)
	}
	password, err := newPassword()
	if err != nil {
		return err
	}
	opts := append(c.s.common(RoleStore),
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
	if h != nil {
		c.setRole(RoleStore, h)
	}
	if err != nil {
		return err
	}
	c.store = ctr
	c.storeURL = postgres.URL(AliasStore+":"+storePort, ctr.Username, ctr.Password, ctr.Database)
	return nil
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
