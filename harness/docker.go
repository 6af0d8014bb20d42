package harness

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// ryukEnv turns testcontainers-go's reaper off. Its image cannot be pulled
// here, and the harness does its own cleanup (Close, reaping dead runs).
const ryukEnv = "TESTCONTAINERS_RYUK_DISABLED"

// pingTimeout bounds the question "does an engine answer?": an engine
// that is there answers in milliseconds, and a hung socket must not hang
// the run.
const pingTimeout = 5 * time.Second

// disableReaper sets TESTCONTAINERS_RYUK_DISABLED=true unless the user set
// it to false on purpose. It must run before the first testcontainers-go
// call of the process: the library reads its configuration once. A truthy
// spelling other than "true" is normalised, because the library honours
// the exact word only.
func disableReaper() {
	v, ok := os.LookupEnv(ryukEnv)
	if ok {
		if b, err := strconv.ParseBool(v); err == nil && !b {
			return
		}
	}
	if v != "true" {
		_ = os.Setenv(ryukEnv, "true")
	}
}

// DockerAvailable reports whether a Docker engine answers, so that a test
// can skip a bed with a clear message where there is none. The error
// wraps ErrInfrastructure.
func DockerAvailable(ctx context.Context) error {
	cli, err := dockerClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	return nil
}

// dockerClient connects to the engine testcontainers-go would use
// (DOCKER_HOST, its properties file, the default socket) and checks that
// it answers.
func dockerClient(ctx context.Context) (*client.Client, error) {
	disableReaper()
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, infra("connect to Docker", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, infra(fmt.Sprintf("ping Docker at %s", cli.DaemonHost()), err)
	}
	return cli.Client, nil
}
