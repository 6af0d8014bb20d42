package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/conf"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// ErrAdoption refuses an adoption, the mesh left as it was: no seat
// recorded, no file written.
var ErrAdoption = errors.New("adoption refused")

// AdoptOptions say which server Adopt puts in the seat.
type AdoptOptions struct {
	// Config is the configuration file the server watches, as this
	// process reaches it: read at adoption, written from then on.
	Config string
	// Monitor is the server's monitoring endpoint (http://host:port);
	// default the description's bus.monitor and bus.monitor_port.
	Monitor string
	// LiveWithin bounds the wait for the server to load each
	// configuration written; default 30 s (its watcher polls every
	// second).
	LiveWithin time.Duration
}

// AdoptResult is what an adoption did.
type AdoptResult struct {
	Seat     string `json:"seat"`
	Module   string `json:"module"`
	Server   string `json:"server"`
	ServerID string `json:"server_id"`
	Config   string `json:"config"`
	// Adopted is when the seat was recorded; Live when the server had
	// loaded the mesh's composition.
	Adopted time.Time `json:"adopted"`
	Live    time.Time `json:"live"`
	// Resumed is true when the seat was recorded by an adoption that
	// stopped before its composition was live, which this one completed.
	Resumed bool `json:"resumed"`
}

// Adopt puts the NATS server that stands beside the broker of a mesh on
// AMQP into seat mesh-broker, in place (design 25 §9 step 2, ADR 0100):
// the server is not restarted, and what it was raised with (its name,
// listeners, TLS, JetStream's data, its own accounts) stays. It is
// refused, with nothing changed, unless the mesh is on AMQP, its
// description in force declares the module claiming the seat and places
// it on no node (the seat is the adopted server's, and one per mesh), no
// server holds the seat already, the configuration file reads as a
// nats-server configuration the mesh can be composed into
// (compose.ReadRaised), and the server answers at its monitoring
// endpoint, listening on the description's bus port with TLS.
//
// The seat is recorded (what the server was raised with in it) before
// anything is written: the commit is the adoption. The configuration is
// then written twice, each load awaited: the mesh's accounts bare, then
// whole (compose.AdoptedBare). An adoption stopped after its commit is
// completed by Adopt run again (Resumed) or by the running controller
// (KeepAdopted); one stopped before it left nothing.
func Adopt(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir string, o Options, ao AdoptOptions) (AdoptResult, error) {
	o = o.WithDefaults()
	var res AdoptResult
	err := composing(ctx, dir, func() error {
		if ao.Config == "" {
			return fmt.Errorf("%w: no configuration file given (--config)", ErrAdoption)
		}
		bus, err := MeshBus(ctx, st)
		if err != nil {
			return err
		}
		if bus != AMQP {
			return fmt.Errorf("%w: the mesh is on %s: its server is its own since genesis; adoption puts a server beside the broker of a mesh on AMQP", ErrAdoption, bus)
		}
		m, err := Described(ctx, m, st)
		if err != nil {
			return err
		}
		mod, err := brokerModule(m)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrAdoption, err)
		}
		if ao.Monitor == "" {
			ao.Monitor = "http://" + net.JoinHostPort(m.Bus.Monitor, strconv.Itoa(m.Bus.MonitorPort))
		}
		if ao.LiveWithin == 0 {
			ao.LiveWithin = 30 * time.Second
		}
		composed, err := os.ReadFile(statedir.Layout{Dir: dir}.NATSConfig())
		if err != nil {
			return fmt.Errorf("adopt: the mesh's composition: %w", err)
		}

		seats, err := st.Seats(ctx)
		if err != nil {
			return err
		}
		if held, ok := seatNamed(seats, wire.BrokerSeat); ok {
			// Held by an adoption that stopped before its composition was
			// live: complete it; held otherwise: a second assignment.
			full, err := adoptedConfig(held, composed)
			if err != nil {
				return err
			}
			cur, _ := os.ReadFile(held.Config)
			if held.Config != ao.Config || bytes.Equal(cur, full) {
				return fmt.Errorf("%w: seat %s is held already by the server %s at %s (its configuration %s), adopted %s; one server holds it per mesh",
					ErrAdoption, wire.BrokerSeat, held.ServerID, held.Server, held.Config, held.Adopted.Format(time.RFC3339))
			}
			live, err := keepAdopted(ctx, held, composed, ao.LiveWithin, true, o)
			if err != nil {
				return err
			}
			res = resultOf(held, live)
			res.Resumed = true
			return nil
		}

		// The server first: with none, its file is nothing to adopt.
		v, err := readVarz(ctx, ao.Monitor)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrAdoption, err)
		}
		raisedData, err := os.ReadFile(ao.Config)
		if err != nil {
			return fmt.Errorf("%w: read the server's configuration: %w", ErrAdoption, err)
		}
		raised, err := compose.ReadRaised(raisedData)
		if err != nil {
			return fmt.Errorf("%w: the server's configuration %s: %w", ErrAdoption, ao.Config, err)
		}
		var bad []string
		if v.Port != m.Bus.Port {
			bad = append(bad, fmt.Sprintf("it listens on port %d, the description's bus.port is %d", v.Port, m.Bus.Port))
		}
		if !v.TLSRequired {
			bad = append(bad, "its client port does not require TLS")
		}
		if n := raised.ServerName(); n != "" && n != v.ServerName {
			bad = append(bad, fmt.Sprintf("it runs as %q, the configuration %s names %q: not the file it runs", v.ServerName, ao.Config, n))
		}
		if len(bad) > 0 {
			return fmt.Errorf("%w: the server at %s: %s", ErrAdoption, ao.Monitor, strings.Join(bad, "; "))
		}
		seat := store.Seat{Name: wire.BrokerSeat, Module: mod, Server: ao.Monitor, ServerID: v.ServerID,
			Config: ao.Config, Raised: raisedData, Adopted: o.Now().UTC()}
		// Composed and checked before the commit: a mesh whose accounts
		// or users the server already has is refused here, not half-way.
		if _, err := adoptedConfig(seat, composed); err != nil {
			return fmt.Errorf("%w: %w", ErrAdoption, err)
		}
		if err := st.Update(ctx, func(tx store.Tx) error {
			seats, err := tx.Seats(ctx)
			if err != nil {
				return err
			}
			if held, ok := seatNamed(seats, wire.BrokerSeat); ok {
				return fmt.Errorf("%w: seat %s was adopted meanwhile by the server %s at %s", ErrAdoption, wire.BrokerSeat, held.ServerID, held.Server)
			}
			return tx.PutSeat(ctx, seat)
		}); err != nil {
			return err
		}
		o.Logger.Info("seat adopted", "seat", seat.Name, "module", seat.Module, "server", seat.Server, "server_id", seat.ServerID, "config", seat.Config)
		live, err := keepAdopted(ctx, seat, composed, ao.LiveWithin, true, o)
		if err != nil {
			return fmt.Errorf("adopt: seat %s is recorded; its configuration is not live yet (the running controller, or adopt run again, completes it): %w", seat.Name, err)
		}
		res = resultOf(seat, live)
		return nil
	})
	return res, err
}

func resultOf(s store.Seat, live time.Time) AdoptResult {
	return AdoptResult{Seat: s.Name, Module: s.Module, Server: s.Server, ServerID: s.ServerID, Config: s.Config, Adopted: s.Adopted, Live: live}
}

// brokerModule is the module of m claiming the broker's seat, which an
// adoption gives the server; one placed on a node would be a second
// assignment of the seat.
func brokerModule(m *meshdesc.Mesh) (string, error) {
	for _, mod := range m.Modules {
		if mod.Seat != wire.BrokerSeat {
			continue
		}
		for i, n := range m.Nodes {
			if j := slices.Index(n.Modules, mod.Name); j >= 0 {
				return "", fmt.Errorf("seat %s is assigned at nodes[%d] %q.modules[%d] %q, and to an adopted server it would be assigned twice: one server holds it per mesh",
					wire.BrokerSeat, i, n.Name, j, mod.Name)
			}
		}
		return mod.Name, nil
	}
	return "", fmt.Errorf("the description in force declares no module claiming seat %s (a module with seat: %s, placed on no node)", wire.BrokerSeat, wire.BrokerSeat)
}

func seatNamed(seats []store.Seat, name string) (store.Seat, bool) {
	i := slices.IndexFunc(seats, func(s store.Seat) bool { return s.Name == name })
	if i < 0 {
		return store.Seat{}, false
	}
	return seats[i], true
}

// adoptedConfig is what the seat's server is to run with composed.
func adoptedConfig(s store.Seat, composed []byte) ([]byte, error) {
	raised, err := compose.ReadRaised(s.Raised)
	if err != nil {
		return nil, err
	}
	return compose.Adopted(raised, composed)
}

// KeepAdopted makes the configuration of the server adopted into a seat,
// if any, the store's composition (dir's nats.conf) beside what it was
// raised with: what every composition after the adoption does, and what
// completes an adoption that stopped after its commit.
func KeepAdopted(ctx context.Context, st store.Reader, dir string, o Options) error {
	o = o.WithDefaults()
	return composing(ctx, dir, func() error {
		seats, err := st.Seats(ctx)
		if err != nil || len(seats) == 0 {
			return err
		}
		composed, err := os.ReadFile(statedir.Layout{Dir: dir}.NATSConfig())
		if err != nil {
			return err
		}
		for _, s := range seats {
			if _, err := keepAdopted(ctx, s, composed, 30*time.Second, false, o); err != nil {
				return fmt.Errorf("keep the configuration of seat %s: %w", s.Name, err)
			}
		}
		return nil
	})
}

// keepAdopted writes the seat's configuration if it is not composed's;
// with await it returns when the server had loaded it (and when). Where
// the server has not loaded the mesh's accounts yet, as its own
// /accountz says, they are written bare first and that load awaited
// whatever await says (compose.AdoptedBare says why). The file is not
// asked: an adoption killed after it wrote the bare accounts leaves a
// file the server may not have loaded yet, and the whole accounts written
// over it would reach the server in one reload.
func keepAdopted(ctx context.Context, s store.Seat, composed []byte, within time.Duration, await bool, o Options) (time.Time, error) {
	raised, err := compose.ReadRaised(s.Raised)
	if err != nil {
		return time.Time{}, err
	}
	full, err := compose.Adopted(raised, composed)
	if err != nil {
		return time.Time{}, err
	}
	cur, err := os.ReadFile(s.Config)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the adopted server's configuration: %w", err)
	}
	if bytes.Equal(cur, full) {
		// Written only once the server had loaded the accounts bare.
		return time.Time{}, nil
	}
	need := accountsOf(full)
	have, err := serverAccounts(ctx, s.Server)
	if err != nil {
		return time.Time{}, err
	}
	if !containsAll(have, need) {
		bare, err := compose.AdoptedBare(raised, composed)
		if err != nil {
			return time.Time{}, err
		}
		if _, err := atomicfile.Write(s.Config, bare, 0o644, o.syncDir); err != nil {
			return time.Time{}, err
		}
		if err := accountsLoaded(ctx, s.Server, need, within); err != nil {
			return time.Time{}, err
		}
	}
	if !await {
		_, err := atomicfile.Write(s.Config, full, 0o644, o.syncDir)
		return time.Time{}, err
	}
	before, err := readVarz(ctx, s.Server)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := atomicfile.Write(s.Config, full, 0o644, o.syncDir); err != nil {
		return time.Time{}, err
	}
	live, err := loaded(ctx, s.Server, full, before.ConfigLoadTime, within)
	if err != nil {
		return time.Time{}, err
	}
	o.Logger.Info("adopted server's configuration live", "seat", s.Name, "config", s.Config)
	return live, nil
}

// accountsOf are the accounts a configuration names.
func accountsOf(data []byte) []string {
	c, err := conf.Parse(string(data))
	if err != nil {
		return nil
	}
	accounts, _ := c["accounts"].(map[string]any)
	return slices.Sorted(maps.Keys(accounts))
}

func containsAll(have, need []string) bool {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}

// serverAccounts are the accounts the server has loaded, as its own
// /accountz lists them.
func serverAccounts(ctx context.Context, monitor string) ([]string, error) {
	var a struct {
		Accounts []string `json:"accounts"`
	}
	if err := monitorGet(ctx, monitor, "/accountz", &a); err != nil {
		return nil, err
	}
	return a.Accounts, nil
}

// accountsLoaded waits until the server lists every account of need.
func accountsLoaded(ctx context.Context, monitor string, need []string, within time.Duration) error {
	return untilServer(ctx, monitor, "the mesh's accounts", within, func(ctx context.Context) (string, bool, error) {
		have, err := serverAccounts(ctx, monitor)
		return fmt.Sprintf("it has %v", have), err == nil && containsAll(have, need), err
	})
}

// untilServer asks the server every 100 ms, within, until done says it
// has loaded what was written; what says what, and done's first result
// what it last said, for the error.
func untilServer(ctx context.Context, monitor, what string, within time.Duration, done func(context.Context) (string, bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		last, ok, err := done(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the server at %s did not load %s within %s (its log says why; a reload it refuses changes nothing): %s", monitor, what, within, last)
		case <-tick.C:
		}
	}
}

// varz is what the adoption reads of the server's /varz.
type varz struct {
	ServerID       string    `json:"server_id"`
	ServerName     string    `json:"server_name"`
	Port           int       `json:"port"`
	TLSRequired    bool      `json:"tls_required"`
	ConfigLoadTime time.Time `json:"config_load_time"`
}

func readVarz(ctx context.Context, monitor string) (varz, error) {
	var v varz
	if err := monitorGet(ctx, monitor, "/varz", &v); err != nil {
		return varz{}, err
	}
	if v.ServerID == "" {
		return varz{}, fmt.Errorf("%s/varz is not a NATS server's monitoring: it names no server", monitor)
	}
	return v, nil
}

// monitorGet reads the server's monitoring endpoint path into v.
func monitorGet(ctx context.Context, monitor, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, monitor+path, nil)
	if err != nil {
		return fmt.Errorf("the server's monitoring endpoint %q: %w", monitor, err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no NATS server answers at %s%s: %w", monitor, path, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s%s answered %s, not a NATS server's monitoring", monitor, path, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		return fmt.Errorf("%s%s is not a NATS server's monitoring: %w", monitor, path, err)
	}
	return nil
}

// loaded waits until the server has the configuration full loaded, and
// returns when it last loaded one. A load time after before is not
// enough alone: the server applies a reload's accounts and users, then
// sets its load time, so the reload of the bare accounts, seen done by
// their names, may set it after before was read, the full configuration
// not yet loaded (the kill test caught it once in CI). Every account of
// full is asked for its imports and exports, which the bare ones lack;
// /varz, read after, holds the server's lock the reload applies users
// under, so their reload had given the users too.
func loaded(ctx context.Context, monitor string, full []byte, before time.Time, within time.Duration) (time.Time, error) {
	var at time.Time
	want := routesOf(full)
	err := untilServer(ctx, monitor, "the configuration written", within, func(ctx context.Context) (string, bool, error) {
		if missing, err := routesMissing(ctx, monitor, want); err != nil || missing != "" {
			return missing, false, err
		}
		v, err := readVarz(ctx, monitor)
		at = v.ConfigLoadTime
		return "it last loaded one at " + at.Format(time.RFC3339Nano), err == nil && at.After(before), err
	})
	if err != nil {
		return time.Time{}, err
	}
	return at, nil
}

// routes counts an account's imports and exports.
type routes struct{ imports, exports int }

// routesOf is every account of a configuration with what it declares.
func routesOf(data []byte) map[string]routes {
	c, err := conf.Parse(string(data))
	if err != nil {
		return nil
	}
	accounts, _ := c["accounts"].(map[string]any)
	out := make(map[string]routes, len(accounts))
	for name, a := range accounts {
		a, _ := a.(map[string]any)
		imports, _ := a["imports"].([]any)
		exports, _ := a["exports"].([]any)
		out[name] = routes{imports: len(imports), exports: len(exports)}
	}
	return out
}

// routesMissing names the first account of want the server has fewer
// imports or exports in than want says, "" when none. Imports from the
// system account, which the server adds to every account, are not
// counted.
func routesMissing(ctx context.Context, monitor string, want map[string]routes) (string, error) {
	for _, name := range slices.Sorted(maps.Keys(want)) {
		var a struct {
			System  string `json:"system_account"`
			Account struct {
				Imports []struct {
					Account string `json:"account"`
				} `json:"imports"`
				Exports []json.RawMessage `json:"exports"`
			} `json:"account_detail"`
		}
		if err := monitorGet(ctx, monitor, "/accountz?acc="+url.QueryEscape(name), &a); err != nil {
			return "", err
		}
		imports := 0
		for _, i := range a.Account.Imports {
			if i.Account != a.System {
				imports++
			}
		}
		if w := want[name]; imports < w.imports || len(a.Account.Exports) < w.exports {
			return fmt.Sprintf("account %s has %d imports and %d exports of the %d and %d written", name, imports, len(a.Account.Exports), w.imports, w.exports), nil
		}
	}
	return "", nil
}
