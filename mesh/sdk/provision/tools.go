package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// Serve serves the four retirement tools every provider serves (ADR 0230):
// provisioner_retirement, provisioner_retire_approve,
// provisioner_retire_reject and provisioner_delete. Their arguments and
// results are wire's types, documented beside the tool names.
func (l *Loop) Serve(s Server) error {
	for _, t := range []struct {
		name string
		h    ToolHandler
	}{
		{wire.ToolProvisionerRetirement, l.Retirement},
		{wire.ToolProvisionerRetireApprove, l.Approve},
		{wire.ToolProvisionerRetireReject, l.Reject},
		{wire.ToolProvisionerDelete, l.Delete},
	} {
		if err := s.Handle(t.name, t.h); err != nil {
			return fmt.Errorf("serve %s: %w", t.name, err)
		}
	}
	return nil
}

// Retirement is provisioner_retirement: the consumers held or asked for,
// and the set nobody asks for with where it stands (counting, waiting for
// a person, rejected). It takes no arguments.
func (l *Loop) Retirement(_ context.Context, args []byte) ([]byte, error) {
	if err := decodeArgs(wire.ToolProvisionerRetirement, args, &struct{}{}); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return json.Marshal(l.m.status())
}

// Approve is provisioner_retire_approve: the set waiting for a person,
// named as provisioner_retirement showed it, is retired now.
func (l *Loop) Approve(ctx context.Context, args []byte) ([]byte, error) {
	var a wire.SetArgs
	if err := decodeSetArgs(wire.ToolProvisionerRetireApprove, args, &a); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ops, err := l.m.approve(time.Now(), a.Set)
	if err != nil {
		return nil, fmt.Errorf("approve retirement: %w", err)
	}
	results := l.call(ctx, ops)
	l.enqueue(l.m.settle(time.Now(), results))
	l.flush(ctx)
	res := wire.ApproveResult{Set: a.Set, Retired: []wire.ConsumerRef{}}
	done := make(map[Consumer]bool, len(results))
	for _, r := range results {
		if r.err == nil {
			done[r.op.consumer] = true
			res.Retired = append(res.Retired, r.op.consumer.ref())
			res.AccessKept = res.AccessKept || r.accessKept
		}
	}
	for _, o := range ops {
		if !done[o.consumer] {
			res.Failed = append(res.Failed, o.consumer.ref())
		}
	}
	return json.Marshal(res)
}

// Reject is provisioner_retire_reject: the set waiting for a person stays
// active.
func (l *Loop) Reject(ctx context.Context, args []byte) ([]byte, error) {
	var a wire.SetArgs
	if err := decodeSetArgs(wire.ToolProvisionerRetireReject, args, &a); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	kept, evs, err := l.m.reject(time.Now(), a.Set)
	if err != nil {
		return nil, fmt.Errorf("reject retirement: %w", err)
	}
	l.enqueue(evs)
	l.flush(ctx)
	return json.Marshal(wire.RejectResult{Set: a.Set, Kept: refs(kept)})
}

// Delete is provisioner_delete: a retired consumer nobody asks for is
// deleted. Nothing else in the loop deletes.
func (l *Loop) Delete(ctx context.Context, args []byte) ([]byte, error) {
	var a wire.ConsumerRef
	if err := decodeArgs(wire.ToolProvisionerDelete, args, &a); err != nil {
		return nil, err
	}
	for _, f := range [...]struct{ name, v string }{{"consumer", a.Consumer}, {"node", a.Node}} {
		if err := wire.CheckName(f.v); err != nil {
			return nil, fmt.Errorf("%w: %s: field %s: %v", ErrBadArgs, wire.ToolProvisionerDelete, f.name, err)
		}
	}
	c := Consumer{Module: a.Consumer, Node: a.Node}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Decide on what the backend holds now, not on the last pass.
	if err := l.refreshHeld(ctx); err != nil {
		return nil, fmt.Errorf("delete consumer: %w", err)
	}
	if err := l.m.deletable(c); err != nil {
		return nil, fmt.Errorf("delete consumer: %w", err)
	}
	octx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	if err := l.cfg.Provider.Delete(octx, c); err != nil {
		return nil, fmt.Errorf("delete consumer %s on %s: %w", c.Module, c.Node, err)
	}
	l.enqueue(l.m.deleted(time.Now(), c))
	l.flush(ctx)
	return json.Marshal(wire.DeleteResult{ConsumerRef: a, State: wire.ConsumerDeleted})
}

// decodeArgs reads a tool's JSON arguments strictly: a misspelt field is
// refused by name rather than read as absent. Empty arguments are {}.
func decodeArgs(tool string, args []byte, v any) error {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadArgs, tool, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: %s: trailing data after the arguments", ErrBadArgs, tool)
	}
	return nil
}

func decodeSetArgs(tool string, args []byte, a *wire.SetArgs) error {
	if err := decodeArgs(tool, args, a); err != nil {
		return err
	}
	if a.Set == "" {
		return fmt.Errorf("%w: %s: field set is missing", ErrBadArgs, tool)
	}
	return nil
}
