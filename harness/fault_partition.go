package harness

import (
	"context"
	"fmt"
	"time"
)

// partitionFault cuts a member off one of the cluster's networks: it keeps
// running, and nothing on that network reaches it, nor it them. Undone by
// attaching it again under the aliases it had, so its peers find it by
// the same names.
type partitionFault struct {
	network string // Private or Outside
	docker  string // the Docker network's name
	aliases []string
}

func (f *partitionFault) Name() string { return "partition from " + f.network }

func (f *partitionFault) Inject(ctx context.Context, m *Handle) error {
	nets, err := m.Networks(ctx)
	if err != nil {
		return err
	}
	aliases, ok := nets[f.docker]
	if !ok {
		return fmt.Errorf("%s is not on the %s network", m.role, f.network)
	}
	f.aliases = aliases
	if err := m.Disconnect(ctx, f.docker); err != nil {
		return err
	}
	return f.wait(ctx, m, false)
}

func (f *partitionFault) Undo(ctx context.Context, m *Handle) error {
	if err := m.Connect(ctx, f.docker, f.aliases); err != nil {
		return err
	}
	return f.wait(ctx, m, true)
}

// wait polls until the member is (or is not) on the network.
func (f *partitionFault) wait(ctx context.Context, m *Handle, attached bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		nets, err := m.Networks(ctx)
		if err == nil {
			if _, on := nets[f.docker]; on == attached {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to be attached=%v to %s: %w", m.role, attached, f.network, ctx.Err())
		case <-tick.C:
		}
	}
}
