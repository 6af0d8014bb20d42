package host

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link/plane"
)

// TestAHostWhoseTokenTheBusRefusesStopsSayingANewOneIsNeeded: a token
// whose user the bus refuses (here a wrong password; in life one spent
// past its grace, expired or revoked, or a host killed between its answer
// and keeping it) is asked again for TokenRefusedFor, then the host stops
// with ErrTokenRefused rather than retry for ever.
func TestAHostWhoseTokenTheBusRefusesStopsSayingANewOneIsNeeded(t *testing.T) {
	dir := t.TempDir()
	tokenFile := natstest.RefusedTokenFile(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err := Run(ctx, Options{State: State{Dir: filepath.Join(dir, "state")}, TokenFile: tokenFile, TokenRefusedFor: time.Second})
	if !errors.Is(err, ErrTokenRefused) || !errors.Is(err, plane.ErrLoginRefused) || !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "new token") {
		t.Fatalf("expected the host to stop saying a new token is needed, got %v", err)
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Errorf("the host gave up after %v, asked to after a second of refusals", took)
	}
}
