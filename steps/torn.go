package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// harmlessSetting is a setting at its default value: a configuration
// with it added is a different file the server reloads, and serves as
// before.
const harmlessSetting = `"max_payload": 1048576,`

func (s *scenario) bindTorn(sc *godog.ScenarioContext) {
	sc.Step(`^the nats container's configuration file is overwritten in place with its composed content cut right after the "([^"]+)" block$`, s.theConfigurationIsTorn)
	sc.Step(`^the whole composed configuration is written back in place$`, s.theWholeConfigurationIsWrittenBack)
	sc.Step(`^the whole composed configuration is written in place with one harmless setting added$`, s.aHarmlessChangeIsWritten)
	sc.Step(`^the server keeps the configuration it had loaded, same load time and digest, for two watcher-poll intervals$`, s.theServerKeepsItsConfiguration)
	sc.Step(`^the server loads a new configuration within two watcher-poll intervals$`, s.theServerLoadsANewConfiguration)
	sc.Step(`^a client without a user is refused by the server$`, s.anAnonymousClientIsRefused)
	sc.Step(`^every composed user still connects with its own credential$`, s.everyComposedUserConnects)
}

func (s *scenario) theConfigurationIsTorn(_ context.Context, block string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	conf, err := capability[harness.NATSConfig](r)
	if err != nil {
		return err
	}
	whole, err := conf.ReadNATSConfig()
	if err != nil {
		return err
	}
	torn, err := harness.CutAfter(whole, block)
	if err != nil {
		return err
	}
	s.wholeConfig = whole
	return conf.WriteNATSConfig(torn)
}

func (s *scenario) theWholeConfigurationIsWrittenBack() error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	if s.wholeConfig == nil {
		return errors.New("no configuration torn in this scenario")
	}
	conf, err := capability[harness.NATSConfig](r)
	if err != nil {
		return err
	}
	return conf.WriteNATSConfig(s.wholeConfig)
}

func (s *scenario) aHarmlessChangeIsWritten() error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	conf, err := capability[harness.NATSConfig](r)
	if err != nil {
		return err
	}
	whole, err := conf.ReadNATSConfig()
	if err != nil {
		return err
	}
	if len(whole) == 0 || whole[0] != '{' {
		return fmt.Errorf("expected the composed configuration to be a JSON object, it starts %q", whole[:min(len(whole), 16)])
	}
	// The server now runs on a configuration the controller did not
	// compose.
	r.tainted = true
	return conf.WriteNATSConfig(append([]byte("{"+harmlessSetting), whole[1:]...))
}

// watchWindow is how long a step watches the server after the watched
// file changed: two poll intervals and the allowance a reload is given.
// The watcher looks at the file at least once in it, and a reload it
// causes is over well before its end.
func watchWindow(r *raised) time.Duration { return 2*r.poll + reloadAllowance }

// theServerKeepsItsConfiguration reads /varz until the watch window has
// passed and fails at the first reading whose configuration load time or
// digest differs from the noted one. A reload anywhere in the window would
// show, in the reading taken after its end at the latest: the load time
// only moves forward. The scenario's last steps see a real reload this way.
func (s *scenario) theServerKeepsItsConfiguration(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	if s.before.varz.ConfigLoadTime.IsZero() {
		return errors.New("no server configuration noted in this scenario")
	}
	return throughout(ctx, watchWindow(r), func(ctx context.Context) error {
		v, err := s.readVarz(ctx)
		if err != nil {
			return err
		}
		if change := v.Since(s.before.varz); change.Reloaded || change.NewConfiguration {
			return fmt.Errorf("expected the server to keep the configuration loaded at %s (digest %s), got one loaded at %s (digest %s)",
				s.before.varz.ConfigLoadTime, s.before.varz.ConfigDigest, v.ConfigLoadTime, v.ConfigDigest)
		}
		return nil
	})
}

func (s *scenario) theServerLoadsANewConfiguration(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	return within(ctx, watchWindow(r), func(ctx context.Context) error {
		v, err := s.readVarz(ctx)
		if err != nil {
			return err
		}
		if change := v.Since(s.before.varz); !change.Reloaded || !change.NewConfiguration {
			return fmt.Errorf("expected the server to load a new configuration, it still has the one loaded at %s (digest %s)", v.ConfigLoadTime, v.ConfigDigest)
		}
		return nil
	})
}

func (s *scenario) anAnonymousClientIsRefused(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	// Any credential says which certificate the bus presents and by
	// which name; the anonymous client uses neither its user nor password.
	cred, err := r.cluster.Credential(ctx, wire.ControllerUser)
	if err != nil {
		return err
	}
	addr, err := r.cluster.BusAddress(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	nc, err := observe.DialAnonymous(ctx, cred.Fingerprint, cred.Host(), addr)
	if err == nil {
		nc.Close()
		return errors.New("expected the server to refuse a client without a user, it accepted the connection")
	}
	if !isAuthorization(err) {
		return fmt.Errorf("expected an authorization violation for a client without a user, got: %w", err)
	}
	return nil
}

// everyComposedUserConnects logs every composed user in afresh: an open
// connection from before would not show that a login works now.
func (s *scenario) everyComposedUserConnects(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	for _, p := range compose.Principals(r.mesh) {
		cred, err := r.cluster.Credential(ctx, p.User)
		if err != nil {
			return err
		}
		c, err := s.dial(ctx, cred)
		if err != nil {
			return fmt.Errorf("expected %s to connect: %w", p.User, err)
		}
		c.Close()
	}
	return nil
}
