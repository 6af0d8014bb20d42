// Command driver is the Go SDK's conformance driver (docs/conformance.md):
// the bed runs it once per command in a container, with a module's
// credential, and reads what it did as JSON lines (conformance/driverproto).
// It talks to the bus through mesh/sdk and nothing else.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	proto "github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/conformance/fixture"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/sdk/provision"
	"github.com/meshbus/mesh/mesh/wire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one command and returns the exit status: ExitRan whatever the
// bus answered, ExitUsage for bad usage. Help goes to stdout with
// ExitRan and no line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, err := proto.ParseCommand(args)
	switch {
	case errors.Is(err, proto.ErrHelp):
		fmt.Fprint(stdout, proto.Usage("driver"))
		return proto.ExitRan
	case err != nil:
		fmt.Fprintf(stderr, "driver: %v\n\n%s", err, proto.Usage("driver"))
		return proto.ExitUsage
	}
	d := &driver{out: proto.NewWriter(stdout), log: slog.New(slog.NewJSONHandler(stderr, nil))}
	switch c := cmd.(type) {
	case proto.Connect:
		err = d.connect(ctx)
	case proto.Emit:
		err = d.emit(ctx, c)
	case proto.Consume:
		err = d.consume(ctx, c)
	case proto.Serve:
		err = d.serve(ctx, c)
	case proto.Call:
		err = d.call(ctx, c)
	case proto.ReadGrant:
		err = d.grant(c)
	default:
		// Every command of the protocol is implemented: the Go SDK claims
		// every capability.
		fmt.Fprintf(stderr, "driver: %s (%s) is not implemented\n", cmd.Name(), cmd.Capability())
		return proto.ExitUnsupported
	}
	done := proto.Done{OK: true}
	if err != nil {
		done = proto.Failed(class(err), err.Error())
	}
	if err := d.out.Print(done); err != nil {
		fmt.Fprintf(stderr, "driver: %v\n", err)
	}
	return proto.ExitRan
}

// driver is one command's run: where it prints and logs.
type driver struct {
	out *proto.Writer
	log *slog.Logger
}

// class is the protocol's name for what went wrong.
func class(err error) proto.Class {
	var tool *sdk.ToolError
	switch {
	case errors.As(err, &tool):
		return proto.ClassTool
	case errors.Is(err, sdk.ErrFingerprint):
		return proto.ClassFingerprint
	case errors.Is(err, sdk.ErrBootstrap):
		return proto.ClassBootstrap
	case errors.Is(err, wire.ErrBadCredential):
		return proto.ClassCredential
	case errors.Is(err, sdk.ErrNoConsumer):
		return proto.ClassNoConsumer
	case errors.Is(err, sdk.ErrDenied):
		return proto.ClassDenied
	case errors.Is(err, sdk.ErrNoResponders):
		return proto.ClassNoResponders
	case errors.Is(err, sdk.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return proto.ClassTimeout
	}
	return proto.ClassOther
}

func (d *driver) module(ctx context.Context, opts ...sdk.Option) (*sdk.Module, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return sdk.Connect(cctx, "", append([]sdk.Option{sdk.WithLogger(d.log)}, opts...)...)
}

func (d *driver) connect(ctx context.Context) error {
	m, err := d.module(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	return d.out.Print(proto.Identity{
		Node: m.Node(), Module: m.Name(),
		EnvNode: os.Getenv(wire.EnvNode), EnvModule: os.Getenv(wire.EnvModule),
	})
}

func (d *driver) emit(ctx context.Context, c proto.Emit) error {
	var f fixture.Event
	if err := fixture.Read(c.Fixture, &f); err != nil {
		return err
	}
	at, err := wire.ParseTime(f.Time)
	if err != nil {
		return fmt.Errorf("read fixture %s: %w", c.Fixture, err)
	}
	opts := []sdk.PublishOption{sdk.WithEventID(f.ID), sdk.WithTime(at)}
	if f.Causation != "" {
		opts = append(opts, sdk.WithCausation(f.Causation))
	}
	if f.Schema != "" {
		opts = append(opts, sdk.WithSchema(f.Schema))
	}
	m, err := d.module(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	id, err := m.Publish(ctx, f.Key, []byte(f.Body), opts...)
	if err != nil {
		return err
	}
	return d.out.Print(proto.Emitted{ID: id})
}

// consume reports each event its handlers receive. A delivery the SDK
// refuses is not reported: the SDK says so to nobody but its log and, on
// NATS, to the server (a termination with its reason), which is where the
// bed hears it.
func (d *driver) consume(ctx context.Context, c proto.Consume) error {
	failing := failingFor(c.Fail, c.FailFor)
	m, err := d.module(ctx, sdk.WithRedelivery(c.RedeliverAfter))
	if err != nil {
		return err
	}
	defer m.Close()
	handled := make(chan struct{}, 1024)
	for _, p := range c.Patterns {
		err := m.Subscribe(p, func(_ context.Context, e sdk.Event) error {
			_ = d.out.Print(proto.Handled{Event: proto.Event{
				ID: e.ID, Source: e.Source, Node: e.Node, Key: e.Key,
				Time: wire.FormatTime(e.Time), Causation: e.CausationID, Schema: e.Schema,
				Body: string(e.Body),
			}})
			select {
			case handled <- struct{}{}:
			default:
			}
			if failing(e.ID) {
				return errors.New("the driver was told to fail")
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := d.out.Print(proto.Ready{}); err != nil {
		return err
	}
	deadline := time.After(c.Timeout)
	for n := 0; n < c.Count; n++ {
		select {
		case <-handled:
		case <-deadline:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// failingFor says, per event id, whether the handler fails this time:
// always (--fail), for d after the event was first received (--fail-for:
// an outage the handler rides out), or never.
func failingFor(always bool, d time.Duration) func(id string) bool {
	var mu sync.Mutex
	first := map[string]time.Time{}
	return func(id string) bool {
		switch {
		case always:
			return true
		case d <= 0:
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		at, ok := first[id]
		if !ok {
			at = time.Now()
			first[id] = at
		}
		return time.Since(at) < d
	}
}

func (d *driver) serve(ctx context.Context, c proto.Serve) error {
	m, err := d.module(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	err = m.Handle(c.Tool, func(_ context.Context, a []byte) ([]byte, error) {
		_ = d.out.Print(proto.Served{Tool: c.Tool, Args: string(a)})
		switch {
		case c.Panic:
			panic("the driver was told to panic")
		case c.Fail != "":
			return nil, errors.New(c.Fail)
		}
		return a, nil
	})
	if err != nil {
		return err
	}
	if err := d.out.Print(proto.Ready{}); err != nil {
		return err
	}
	select {
	case <-time.After(c.Duration):
	case <-ctx.Done():
	}
	return nil
}

func (d *driver) call(ctx context.Context, c proto.Call) error {
	m, err := d.module(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	body, err := m.Request(cctx, c.Module, c.Tool, []byte(c.Args))
	if err != nil {
		return err
	}
	return d.out.Print(proto.Result{Body: string(body)})
}

func (d *driver) grant(c proto.ReadGrant) error {
	grants, err := provision.ReadGrants(c.File)
	if err != nil {
		return err
	}
	for _, g := range grants {
		if err := d.out.Print(proto.Grant{Module: g.Consumer.Module, Node: g.Consumer.Node}); err != nil {
			return err
		}
	}
	return nil
}
