package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// catalogName is the catalogue's own tool, as Call names it.
const catalogName = wire.CatalogSeat + "." + wire.CatalogTool

// Tools asks the catalogue for the mesh's tools and returns those the
// person's credential says they may call (wire.Credential.MayCall), in
// name order, without the catalogue's own tool: what a person is offered.
// The server's grant is what is enforced; this only spares offering what
// it would refuse.
func (c *Client) Tools(ctx context.Context) ([]wire.ToolInfo, error) {
	cat, err := c.catalogue(ctx)
	if err != nil {
		return nil, err
	}
	return c.mayCall(cat), nil
}

func (c *Client) mayCall(cat wire.Catalogue) []wire.ToolInfo {
	out := []wire.ToolInfo{}
	for _, t := range cat.Tools {
		if t.Module == wire.CatalogSeat && t.Tool == wire.CatalogTool {
			continue
		}
		if c.cred.MayCall(t.Module, t.Tool) {
			out = append(out, t)
		}
	}
	return out
}

// catalogue is the catalogue's whole answer.
func (c *Client) catalogue(ctx context.Context) (wire.Catalogue, error) {
	b, err := c.current()
	if err != nil {
		return wire.Catalogue{}, err
	}
	start := time.Now()
	out, err := b.Request(ctx, wire.CatalogSeat, wire.CatalogTool, emptyArgs)
	if err != nil {
		if errors.Is(err, sdk.ErrNoResponders) {
			return wire.Catalogue{}, failure(KindNoResponders, catalogName, err, "nobody serves the catalogue (%s): the %s module is not running", catalogName, wire.CatalogSeat)
		}
		return wire.Catalogue{}, c.callError(ctx, b, catalogName, err, c.within(ctx, start))
	}
	cat, err := wire.ParseCatalogue(out)
	if err != nil {
		return wire.Catalogue{}, failure(KindFailed, catalogName, err, "the catalogue's answer: %v", err)
	}
	return cat, nil
}

// Call calls the tool name ("<module>.<tool>") with args, a JSON object
// (empty args are {}), and returns the tool's answer. A name not in that
// form and args that are not a JSON object are refused before anything is
// sent (KindUsage). The call goes straight to the tool; the catalogue is
// asked only after the bus said nobody serves it or refused it, to tell a
// tool the mesh does not have (KindNoSuchTool) from one nobody serves
// (KindNoResponders) or the person may not call (KindDenied).
func (c *Client) Call(ctx context.Context, name string, args []byte) ([]byte, error) {
	module, tool, err := splitName(name)
	if err != nil {
		return nil, err
	}
	if args, err = checkArgs(name, args); err != nil {
		return nil, err
	}
	b, err := c.current()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	out, err := b.Request(ctx, module, tool, args)
	if err != nil {
		return nil, c.callError(ctx, b, name, err, c.within(ctx, start))
	}
	return out, nil
}

// within is how long a call begun at start may wait: its context's
// deadline, else the client's timeout.
func (c *Client) within(ctx context.Context, start time.Time) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return dl.Sub(start).Round(time.Millisecond)
	}
	return c.timeout
}

// callError is the *Error a failed call of name through b becomes.
func (c *Client) callError(ctx context.Context, b bus, name string, err error, within time.Duration) error {
	var te *sdk.ToolError
	switch {
	case errors.As(err, &te):
		return failure(KindTool, name, err, "tool %s failed: %s", name, te.Message)
	case errors.Is(err, sdk.ErrNoResponders):
		return c.unknownOr(ctx, name, failure(KindNoResponders, name, err,
			"nobody serves %s: the catalogue lists it, but no module answers it (not running, or still starting)", name))
	case errors.Is(err, sdk.ErrDenied):
		return c.unknownOr(ctx, name, failure(KindDenied, name, err,
			"the bus refused person %s's call to %s: the person has no grant for it", c.cred.Name, name))
	case errors.Is(err, sdk.ErrTimeout):
		return failure(KindTimeout, name, err, "%s did not answer within %s", name, within)
	case errors.Is(err, sdk.ErrInvalid):
		return failure(KindUsage, name, err, "call %s: %v", name, err)
	case errors.Is(err, sdk.ErrClosed):
		return c.lost(ctx, b, name, err)
	}
	return failure(KindFailed, name, err, "call %s: %v", name, err)
}

// unknownOr asks the catalogue whether the mesh has the tool name: if it
// does not, the failure is KindNoSuchTool; if it does, or the catalogue
// cannot say, it is e (saying so when the catalogue could not be asked).
func (c *Client) unknownOr(ctx context.Context, name string, e *Error) error {
	if name == catalogName {
		return e
	}
	cat, err := c.catalogue(ctx)
	if err != nil {
		e.msg += fmt.Sprintf(" (whether the mesh has such a tool is unknown: %v)", err)
		return e
	}
	for _, t := range cat.Tools {
		if t.Name() == name {
			return e
		}
	}
	return failure(KindNoSuchTool, name, e.err, "no tool %s in the mesh's catalogue (%s)", name, listing(c.mayCall(cat)))
}

// maxListed bounds how many tools a "no such tool" message names.
const maxListed = 12

// listing names the tools a person may call, for a message.
func listing(tools []wire.ToolInfo) string {
	if len(tools) == 0 {
		return "it lists none this person may call"
	}
	names := make([]string, 0, min(len(tools), maxListed))
	for _, t := range tools[:min(len(tools), maxListed)] {
		names = append(names, t.Name())
	}
	s := "it lists: " + strings.Join(names, ", ")
	if len(tools) > maxListed {
		s += fmt.Sprintf(", … (%d in all)", len(tools))
	}
	return s
}
