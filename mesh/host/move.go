package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// reachWithin bounds a host's attempt to reach the bus a cutover moves it
// to, at prepare and at the switch.
const reachWithin = 10 * time.Second

// errMoveWaits is wrapped when a switch cannot be made yet (the new bus
// out of reach, the credentials not answered): the node stays on the bus
// it is on, and tries again at its next poll.
var errMoveWaits = errors.New("the move waits")

// move does what a declaration's Move asks of a node not yet on its bus
// (docs/decisions/0013). Prepare: the host's new credential, fetched
// sealed, lets it in to the new bus, and the connection is closed at once:
// nothing moves. Switch: the same, and then the modules' credentials and
// the host's own are kept as the new bus's (the host's last: until it is
// kept the node is on the old bus, and a host killed in between does it
// again), and the connection made is the one the host goes on with
// (n.moved). A prepare that cannot reach the new bus is a refusal (the
// controller stops the cutover on it); a switch that cannot waits.
func (n *node) move(ctx context.Context, bus plane.CredentialAsker, d wire.Declaration) (refused string, err error) {
	mv := d.Move
	if mv.Switch {
		n.log.Info(SwitchingLog, "generation", mv.Generation, "bus", mv.Bus)
	}
	next, err := n.nextCredentials(ctx, bus, d)
	if err != nil {
		if mv.Switch {
			return "", fmt.Errorf("%w: %w", errMoveWaits, err)
		}
		return wire.MoveRefusal(mv.Generation, mv.Bus, err.Error()), nil
	}
	nb, err := n.reach(ctx, next.host)
	if err != nil {
		why := fmt.Sprintf("cannot reach %s as %s: %v", mv.Bus, next.host.User(), err)
		if mv.Switch {
			return "", fmt.Errorf("%w: %s", errMoveWaits, why)
		}
		return wire.MoveRefusal(mv.Generation, mv.Bus, why), nil
	}
	if !mv.Switch {
		_ = nb.Close()
		n.log.Info("prepared to move: the new bus lets this host in", "generation", mv.Generation, "bus", mv.Bus)
		return "", nil
	}
	for mod, doc := range next.modules {
		id, err := n.identity(mod)
		if err == nil {
			err = n.state.keepForModule(mod, credentialName, doc, id)
		}
		if err != nil {
			_ = nb.Close()
			return "", fmt.Errorf("%w: keep module %s's credential: %w", errMoveWaits, mod, err)
		}
	}
	if err := n.state.PutCredential(next.host); err != nil {
		_ = nb.Close()
		return "", fmt.Errorf("%w: keep the host's credential: %w", errMoveWaits, err)
	}
	n.log.Info("switched", "generation", mv.Generation, "bus", mv.Bus)
	n.cred, n.moved = next.host, nb
	return "", nil
}

// reach dials the new bus as the host, trying again until reachWithin:
// a login the server refuses while it reloads its configuration (seen at
// N = 200, once, during the reload that removed the spent tokens' users)
// is not a node that cannot move. The last error is returned.
func (n *node) reach(ctx context.Context, cred wire.Credential) (plane.Host, error) {
	ctx, cancel := context.WithTimeout(ctx, reachWithin)
	defer cancel()
	pause := 200 * time.Millisecond
	for {
		nb, err := buses.DialHost(ctx, cred, append([]link.Option{link.WithConnectionLog(n.log)}, n.dial...)...)
		if err == nil {
			return nb, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// next are a node's credentials on the bus its declaration moves it to.
type next struct {
	host    wire.Credential
	modules map[string][]byte
}

// nextCredentials asks the controller for the node's credentials on the
// bus d moves it to (wire.CredentialsAnswer.Next), opens each with the
// node's key and checks it is this node's and its modules', for that bus.
func (n *node) nextCredentials(ctx context.Context, bus plane.CredentialAsker, d wire.Declaration) (next, error) {
	mv := d.Move
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	answer, err := bus.Credentials(cctx, d.Node)
	if err != nil {
		return next{}, fmt.Errorf("ask for the credentials on %s: %w", mv.Bus, err)
	}
	var a wire.CredentialsAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
		return next{}, fmt.Errorf("the credentials on %s: not an answer: %w", mv.Bus, err)
	}
	switch {
	case a.Refused != "":
		return next{}, fmt.Errorf("the credentials on %s were refused: %s", mv.Bus, a.Refused)
	case a.Next == nil || a.Next.Generation != mv.Generation || a.Next.Bus != mv.Bus:
		return next{}, fmt.Errorf("the controller answered no credentials for cutover %d to %s", mv.Generation, mv.Bus)
	}
	open := func(sealed []byte, module string) ([]byte, wire.Credential, error) {
		doc, err := n.sealing.Open(sealed)
		if err != nil {
			return nil, wire.Credential{}, err
		}
		c, err := wire.ParseCredential(doc)
		switch {
		case err != nil:
			return nil, wire.Credential{}, err
		case c.Node != d.Node || c.Module != module:
			return nil, wire.Credential{}, fmt.Errorf("it is %s's", c.User())
		case wire.BusOfScheme(c.Scheme()) != mv.Bus:
			return nil, wire.Credential{}, fmt.Errorf("it dials %s, not %s", c.Scheme(), mv.Bus)
		}
		return doc, c, nil
	}
	_, host, err := open(a.Next.Host, "")
	if err == nil && host.Principal != wire.PrincipalHost {
		err = fmt.Errorf("it is %s's, not a host's", host.User())
	}
	if err != nil {
		return next{}, fmt.Errorf("the host's credential on %s: %w", mv.Bus, err)
	}
	if host.DeclarationKey != n.cred.DeclarationKey {
		// The key declarations are checked with is the one the node
		// enrolled with; a move changes where it dials, nothing else.
		err = errors.New("it names another key for the declarations than the one this node enrolled with")
	}
	if err != nil {
		return next{}, fmt.Errorf("the host's credential on %s: %w", mv.Bus, err)
	}
	out := next{host: host, modules: map[string][]byte{}}
	for _, mod := range d.Modules {
		sealed, ok := a.Next.Sealed[mod]
		if !ok {
			return next{}, fmt.Errorf("no credential on %s for module %s", mv.Bus, mod)
		}
		doc, _, err := open(sealed, mod)
		if err != nil {
			return next{}, fmt.Errorf("module %s's credential on %s: %w", mod, mv.Bus, err)
		}
		out.modules[mod] = doc
	}
	return out, nil
}
