// Command pry is the beds' module that is not content with its own
// credential (issue 18, the living bed's @isolation): run by a host as a
// module, it looks for every credential it might find on its node — the
// host's, the node's sealing key, its siblings', the enrolment token, the
// host's environment — and connects to the bus as each one it can read,
// naming those connections "pry". Then it connects as itself, named
// "pry: tried", and stays connected until it is told to stop: a bed asks
// the server, from outside, who connected.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/wire"
)

// Names the bed reads on the server.
const (
	// Found names a connection made with a credential that is not pry's.
	Found = "pry"
	// Tried names pry's own connection, made once it has tried all.
	Tried = "pry: tried"
)

// siblings are module names worth trying where the modules' directory
// cannot be listed: the sample mesh's.
var siblings = []string{"sensor", "mesh-catalog", "logger", "relay", "stranger", "echo"}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.Error("pry stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	own := os.Getenv(wire.EnvCredential)
	data, err := os.ReadFile(own)
	if err != nil {
		return fmt.Errorf("read its own credential: %w", err)
	}
	self, err := wire.ParseCredential(data)
	if err != nil {
		return fmt.Errorf("read its own credential: %w", err)
	}
	found := look(own, log)
	var held []io.Closer
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for path, cred := range found {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := dial(dctx, cred, Found)
		cancel()
		if err != nil {
			log.Info("could not connect with what it found", "file", path, "user", cred.User(), "err", err)
			continue
		}
		log.Warn("connected with what it found", "file", path, "user", cred.User())
		held = append(held, c)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	c, err := dial(dctx, self, Tried)
	cancel()
	if err != nil {
		return fmt.Errorf("connect as itself: %w", err)
	}
	defer c.Close()
	log.Info("tried", "found", len(found))
	<-ctx.Done()
	return nil
}

// dial connects with cred to the bus its URL's scheme names, the
// connection named name where the server shows it: NATS's /connz, or the
// broker's client-provided connection_name (its own record, which the bed
// reads, has every connection, refused logins included). Not through the
// SDK: it takes a module's credential alone, and what pry finds may be a
// host's or a token's.
func dial(ctx context.Context, cred wire.Credential, name string) (io.Closer, error) {
	switch cred.Scheme() {
	case "amqps", "amqp":
		conn, err := amqpconn.Dial(ctx, cred, amqpconn.Options{Name: name, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, err
		}
		return amqpCloser{conn}, nil
	default:
		nc, err := link.Dial(ctx, cred, link.WithName(name))
		if err != nil {
			return nil, err
		}
		return natsCloser{nc}, nil
	}
}

type natsCloser struct{ nc *nats.Conn }

func (c natsCloser) Close() error { c.nc.Close(); return nil }

// amqpCloser closes an AMQP connection within amqpCloseWithin.
type amqpCloser struct{ conn *amqpconn.Conn }

const amqpCloseWithin = 5 * time.Second

func (c amqpCloser) Close() error { return c.conn.Close(time.Now().Add(amqpCloseWithin), nil) }

// look reads every file where a credential of another principal might
// be, from where its own is (<state>/modules/<module>/credential.json, or
// an older layout's <state>/modules/<module>.json), and returns the
// credentials it could read and parse, by file.
func look(own string, log *slog.Logger) map[string]wire.Credential {
	var states []string
	for dir := filepath.Dir(own); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		states = append(states, dir)
	}
	var paths []string
	for _, state := range states {
		paths = append(paths, filepath.Join(state, "credential.json"), filepath.Join(state, "sealing-key.json"))
		names := slices.Clone(siblings)
		if entries, err := os.ReadDir(filepath.Join(state, "modules")); err == nil {
			for _, e := range entries {
				names = append(names, e.Name())
			}
		}
		for _, name := range names {
			paths = append(paths,
				filepath.Join(state, "modules", name, "credential.json"),
				filepath.Join(state, "modules", name+".json"),
				filepath.Join(state, "configs", name+".json"))
		}
	}
	paths = append(paths, "/etc/mesh-host/token.json", "/proc/1/environ", fmt.Sprintf("/proc/%d/environ", os.Getppid()))
	found := map[string]wire.Credential{}
	for _, path := range paths {
		if path == own {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		log.Warn("read what is not its own", "file", path, "bytes", len(data))
		// Read loosely, as an attacker would: whatever has a bus URL is
		// worth a try.
		var c wire.Credential
		if json.Unmarshal(data, &c) == nil && c.URL != "" {
			found[path] = c
		}
	}
	return found
}
