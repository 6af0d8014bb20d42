package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

func TestURL(t *testing.T) {
	got := URL("127.0.0.1:5433", "mesh", "p@ss/w:rd", "store-1", "application_name=test")
	u, err := url.Parse(got)
	if err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	pw, _ := u.User.Password()
	if u.Scheme != "postgres" || u.Host != "127.0.0.1:5433" || u.User.Username() != "mesh" || pw != "p@ss/w:rd" || u.Path != "/store-1" {
		t.Fatalf("expected the parts back from %s, got %+v", got, u)
	}
	if q := u.Query(); q.Get("sslmode") != "disable" || q.Get("application_name") != "test" {
		t.Fatalf("expected sslmode=disable and the extra parameter in %s", got)
	}
}

func TestRunRefusesBadOptionsBeforeAContainer(t *testing.T) {
	for name, opt := range map[string]Option{
		"empty user":      WithUsername(""),
		"quoted database": WithDatabase(`a"b`),
		"space in user":   WithUsername("a b"),
		"empty password":  WithPassword(""),
		"database with ;": WithDatabase("x;drop"),
	} {
		c, err := Run(context.Background(), "no-such-image:never", opt)
		if !errors.Is(err, ErrInvalidOption) || c != nil {
			t.Errorf("%s: expected ErrInvalidOption and no container, got %v, %v", name, c, err)
		}
	}
}

// target is a container as the wait strategy sees it.
type target struct {
	wait.StrategyTarget
	state *container.State
	env   []string
	port  string
}

func (f *target) State(context.Context) (*container.State, error) { return f.state, nil }
func (f *target) Inspect(context.Context) (*container.InspectResponse, error) {
	return &container.InspectResponse{Config: &container.Config{Env: f.env}}, nil
}
func (f *target) MappedPort(context.Context, string) (network.Port, error) {
	return network.ParsePort(f.port + "/tcp")
}

func TestWaitFailsFastOnAnExitedContainer(t *testing.T) {
	w := &connectable{timeout: time.Minute, poll: 10 * time.Millisecond}
	start := time.Now()
	err := w.WaitUntilReady(context.Background(), &target{state: &container.State{Status: container.StateExited, ExitCode: 2}})
	if err == nil || !strings.Contains(err.Error(), "exit code 2") {
		t.Fatalf("expected the exit code in the error, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("expected the wait to end at once, took %s", d)
	}
}

func TestWaitGivesUpWithTheLastError(t *testing.T) {
	// A running container whose port nobody serves: the wait ends at its
	// timeout, saying why the last connection failed.
	w := &connectable{timeout: 600 * time.Millisecond, poll: 50 * time.Millisecond}
	err := w.WaitUntilReady(context.Background(), &target{
		state: &container.State{Running: true, Status: container.StateRunning},
		env:   []string{"POSTGRES_USER=u", "POSTGRES_PASSWORD=p"},
		port:  "1", // tcpmux: nothing listens on the loopback
	})
	if err == nil || !strings.Contains(err.Error(), "not accepting a connection") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("expected a timeout naming the address tried, got %v", err)
	}
}

func TestContainerEnv(t *testing.T) {
	env, err := containerEnv(context.Background(), &target{env: []string{"PATH=/bin", "POSTGRES_USER=meshy", "POSTGRES_PASSWORD=a=b"}})
	if err != nil {
		t.Fatal(err)
	}
	if env["POSTGRES_USER"] != "meshy" || env["POSTGRES_PASSWORD"] != "a=b" || env["POSTGRES_DB"] != "meshy" {
		t.Fatalf("expected the user, the password with its = and the database defaulting to the user, got %v", env)
	}
}
