package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/meshbus/mesh/harness/images"
)

// ErrFaultUnavailable: the fault cannot be applied on this machine (the
// kernel lacks what it needs); the error says what is missing.
var ErrFaultUnavailable = errors.New("fault not available here")

// nftTable is the table a loss fault adds to the member's namespace.
const nftTable = "mesh_fault"

// linkFault degrades a member's link on one network, from a helper
// container (mesh-netem) sharing the member's network namespace with
// NET_ADMIN: the member's own image has nothing to do it with (scratch).
//   - loss drops that share of the packets in and out (nftables, numgen
//     random), so connections stall and retransmit;
//   - delay holds every packet out for that long (tc netem). It needs the
//     kernel's sch_netem; where it is missing the fault says so
//     (ErrFaultUnavailable) rather than pretending.
//
// Undone by removing the table or the qdisc.
type linkFault struct {
	c       *Cluster
	kind    string // loss or delay
	percent int
	delay   time.Duration
	network string // Private or Outside
	docker  string
}

func (f *linkFault) Name() string {
	if f.kind == "loss" {
		return fmt.Sprintf("loss %d%% on %s", f.percent, f.network)
	}
	return fmt.Sprintf("delay %s on %s", f.delay, f.network)
}

// parseLink reads "loss 30% on private" or "delay 200ms on private".
func (c *Cluster) parseLink(name string) (*linkFault, bool) {
	kind, rest, ok := strings.Cut(name, " ")
	if !ok || (kind != "loss" && kind != "delay") {
		return nil, false
	}
	amount, which, ok := strings.Cut(rest, " on ")
	net, known := c.networks[which]
	if !ok || !known {
		return nil, false
	}
	f := &linkFault{c: c, kind: kind, network: which, docker: net}
	if kind == "loss" {
		p, err := strconv.Atoi(strings.TrimSuffix(amount, "%"))
		if err != nil || !strings.HasSuffix(amount, "%") || p < 1 || p > 100 {
			return nil, false
		}
		f.percent = p
		return f, true
	}
	d, err := time.ParseDuration(amount)
	if err != nil || d <= 0 || d > time.Minute {
		return nil, false
	}
	f.delay = d
	return f, true
}

// device is a shell snippet setting $dev to the member's interface on the
// fault's network, found by the address Docker gave it there.
func (f *linkFault) device(ctx context.Context, m *Handle) (string, error) {
	res, err := m.docker.ContainerInspect(ctx, m.id, client.ContainerInspectOptions{})
	if err != nil {
		return "", infra("inspect "+m.role, err)
	}
	ep := res.Container.NetworkSettings.Networks[f.docker]
	if ep == nil || !ep.IPAddress.IsValid() {
		return "", fmt.Errorf("%s has no address on the %s network", m.role, f.network)
	}
	ip := ep.IPAddress.String()
	return `dev=$(ip -o -4 addr show | awk '$4 ~ /^` + strings.ReplaceAll(ip, ".", `\.`) + `\// {print $2; exit}'); ` +
		`[ -n "$dev" ] || { echo "no interface holds ` + ip + `" >&2; exit 3; }; `, nil
}

func (f *linkFault) Inject(ctx context.Context, m *Handle) error {
	dev, err := f.device(ctx, m)
	if err != nil {
		return err
	}
	var script string
	if f.kind == "loss" {
		// numgen's values are 0–99: "< 100" is refused, and is every packet.
		chance := "numgen random mod 100 < " + strconv.Itoa(f.percent) + " "
		if f.percent == 100 {
			chance = ""
		}
		script = dev + `nft add table inet ` + nftTable + ` && ` +
			`nft 'add chain inet ` + nftTable + ` in { type filter hook input priority -300; }' && ` +
			`nft 'add chain inet ` + nftTable + ` out { type filter hook output priority -300; }' && ` +
			`nft "add rule inet ` + nftTable + ` in iifname $dev ` + chance + `drop" && ` +
			`nft "add rule inet ` + nftTable + ` out oifname $dev ` + chance + `drop" && ` +
			`nft list table inet ` + nftTable
	} else {
		ms := strconv.FormatInt(f.delay.Milliseconds(), 10)
		script = dev + `out=$(tc qdisc add dev $dev root netem delay ` + ms + `ms 2>&1) || { echo "$out" >&2; ` +
			`case "$out" in *"qdisc kind is unknown"*) exit 4;; esac; exit 1; }; tc qdisc show dev $dev | grep -q netem`
	}
	code, out, err := f.run(ctx, m, script)
	switch {
	case err != nil:
		return err
	case code == 4:
		return fmt.Errorf("%w: delay needs the kernel's netem qdisc (sch_netem), which this machine's kernel does not have: %s", ErrFaultUnavailable, strings.TrimSpace(out))
	case code != 0:
		return fmt.Errorf("%s on %s: the helper exited %d: %s", f.Name(), m.role, code, strings.TrimSpace(out))
	}
	return nil
}

func (f *linkFault) Undo(ctx context.Context, m *Handle) error {
	dev, err := f.device(ctx, m)
	if err != nil {
		return err
	}
	script := dev + `nft delete table inet ` + nftTable + ` && ! nft list table inet ` + nftTable + ` 2>/dev/null`
	if f.kind == "delay" {
		script = dev + `tc qdisc del dev $dev root 2>/dev/null; ! tc qdisc show dev $dev | grep -q netem`
	}
	code, out, err := f.run(ctx, m, script)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("undo %s on %s: the helper exited %d: %s", f.Name(), m.role, code, strings.TrimSpace(out))
	}
	return nil
}

// run runs script in mesh-netem, in the member's network namespace.
func (f *linkFault) run(ctx context.Context, m *Handle, script string) (int, string, error) {
	image, err := f.c.s.builder.EnsureDebian(ctx, images.Netem(images.DebianFromEnv(os.Getenv)))
	if err != nil {
		return 0, "", infra("ensure the netem helper image", err)
	}
	h, code, err := f.c.s.runOnce(ctx, "netem", image, time.Minute,
		testcontainers.WithCmd("/bin/sh", "-c", script),
		testcontainers.WithConfigModifier(func(cfg *container.Config) { cfg.User = "0:0" }),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = container.NetworkMode("container:" + m.id)
			hc.CapAdd = append(hc.CapAdd, "NET_ADMIN")
		}),
	)
	if err != nil {
		return 0, "", err
	}
	logs, err := h.Logs(ctx)
	return code, logs, err
}
