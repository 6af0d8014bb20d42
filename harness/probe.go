package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
)

// probeTimeout bounds one probe container's whole run; the probe gives up
// on its target sooner (its own --timeout, 3 s by default).
const probeTimeout = 30 * time.Second

// ProbeResult is what mesh-probe saw from its network: the JSON line it
// prints.
type ProbeResult struct {
	// OK is true when the target answered: any HTTP response, or an
	// accepted TCP connection.
	OK bool `json:"ok"`
	// Status is the HTTP status, 0 for tcp or when nothing answered.
	Status int `json:"status"`
	// Body is the start of the HTTP body.
	Body string `json:"body"`
	// Error says why the target did not answer.
	Error string `json:"error"`
	// ConnectMS is how long a tcp probe's handshake took, in
	// milliseconds (the name lookup left out); 0 when nothing answered.
	ConnectMS float64 `json:"connect_ms"`
}

// Probe runs mesh-probe once on network which (Private or Outside) with
// args — `http URL` or `tcp HOST:PORT` — and returns what it saw. A target
// that does not answer is a result (OK false), not an error; err is set
// when the probe could not run or was misused (exit 2).
func (c *Cluster) Probe(ctx context.Context, which string, args ...string) (ProbeResult, error) {
	net, err := c.NetworkName(which)
	if err != nil {
		return ProbeResult{}, err
	}
	h, exit, err := c.s.runOnce(ctx, "probe", c.images.probe, probeTimeout,
		testcontainers.WithCmd(args...),
		network.WithNetworkName(nil, net),
	)
	if err != nil {
		return ProbeResult{}, err
	}
	if exit != 0 {
		logs, _ := h.Logs(ctx)
		return ProbeResult{}, fmt.Errorf("probe %v from %s: exit %d:\n%s", args, which, exit, tail(logs, tailLines))
	}
	out, err := h.stdout(ctx)
	if err != nil {
		return ProbeResult{}, err
	}
	return parseProbe(out)
}

// parseProbe reads the last non-empty line of the probe's standard output.
func parseProbe(out string) (ProbeResult, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return ProbeResult{}, fmt.Errorf("read probe result: no output")
	}
	var r ProbeResult
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		return ProbeResult{}, fmt.Errorf("read probe result %q: %w", last, err)
	}
	return r, nil
}
