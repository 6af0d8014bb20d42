package rollout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// AMQPClients counts, through the broker's management API at endpoint as
// user, the open connections of each of users and of any user connected
// to one of vhosts (amqpadmin.ClientsAs).
type AMQPClients func(ctx context.Context, endpoint, user, password string, users, vhosts []string) (map[string]int, error)

// ObserveCompat asks the broker who of the compatibility broker's clients
// (the description's compat module: the predecessor's users and virtual
// hosts) is connected now, and records it with since when nobody has
// been (store.Compat): what status reads the retirement condition from.
// A description without a compatibility broker, or a program without
// AMQPClients, records nothing.
func ObserveCompat(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options) error {
	o = o.WithDefaults()
	m, err := Described(ctx, m, st)
	if err != nil {
		return err
	}
	mod, ok := m.CompatBroker()
	if !ok || o.AMQPClients == nil || m.AMQP == nil {
		return nil
	}
	secrets, err := st.Secrets(ctx)
	if err != nil {
		return err
	}
	admin, ok := secrets[wire.AMQPAdminUser]
	if !ok {
		return fmt.Errorf("the compatibility broker's clients: the store holds no secret of the broker's administrator %s", wire.AMQPAdminUser)
	}
	endpoint := "http://" + net.JoinHostPort(m.AMQP.Management, strconv.Itoa(m.AMQP.ManagementPort))
	connected, err := o.AMQPClients(ctx, endpoint, wire.AMQPAdminUser, admin.Password, mod.Compat.Users, mod.Compat.Vhosts)
	if err != nil {
		return fmt.Errorf("the compatibility broker's clients, through the management API at %s as %s: %w", endpoint, wire.AMQPAdminUser, err)
	}
	now := o.Now().UTC()
	return st.Update(ctx, func(tx store.Tx) error {
		seen := store.Compat{Module: mod.Name, Checked: now, Connected: connected, RetireAfter: mod.Compat.RetireAfterDuration()}
		before, err := tx.Compat(ctx)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if seen.Clients() == 0 {
			seen.IdleSince = now
			if err == nil && before.Module == mod.Name && before.Clients() == 0 && !before.IdleSince.IsZero() {
				seen.IdleSince = before.IdleSince
			}
		}
		return tx.PutCompat(ctx, seen)
	})
}
