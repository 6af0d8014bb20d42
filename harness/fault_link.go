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
	"github.com/testcontainers/testcontainers-go/wait"

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
//   - delay holds every packet the member sends on that network for that
//     long (egress only, as netem does): with tc netem where the kernel
//     has sch_netem; else iptables queues them (NFQUEUE, --queue-bypass)
//     to mesh-delay, run in a long-lived helper for as long as the fault
//     lasts, which accepts each once its time has passed
//     (docs/decisions/0002-delay-without-netem.md).
//
// Undone by removing the table, the qdisc, or the rules and the helper.
type linkFault struct {
	c       *Cluster
	kind    string // loss or delay
	percent int
	delay   time.Duration
	network string // Private or Outside
	docker  string
	// delayer is the helper running mesh-delay, when delay went that way.
	delayer *Handle
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
		f.c.s.narrate("fault: %s on %s: this kernel has no netem qdisc (%s); holding its packets out with mesh-delay (NFQUEUE %d) instead",
			f.Name(), m.role, strings.TrimSpace(out), delayQueue)
		return f.queueDelay(ctx, m, dev)
	case code != 0:
		return fmt.Errorf("%s on %s: the helper exited %d: %s", f.Name(), m.role, code, strings.TrimSpace(out))
	}
	return nil
}

// delayQueue is the NFQUEUE queue a delay uses. Queues belong to a
// network namespace, so one number serves every member.
const delayQueue = 7

// delayRule is the iptables rule spec sending the member's packets out of
// $dev to mesh-delay: --queue-bypass lets them through undelayed when no
// one listens (the delayer died), rather than dropping them.
var delayRule = "OUTPUT -o $dev -j NFQUEUE --queue-num " + strconv.Itoa(delayQueue) + " --queue-bypass"

// queueRules is a shell snippet appending delayRule for IPv4 and IPv6
// with the first iptables backend that takes both (nf_tables through its
// xtables compatibility, else the legacy tables), and setting $v4 and $v6
// to it; it exits 5, saying why, when neither does.
var queueRules = `v4=; errs=; for b in nft legacy; do ` +
	`if out=$(iptables-$b -w -A ` + delayRule + ` 2>&1); then ` +
	`if out=$(ip6tables-$b -w -A ` + delayRule + ` 2>&1); then v4=iptables-$b; v6=ip6tables-$b; break; fi; ` +
	`iptables-$b -w -D ` + delayRule + `; fi; errs="$errs $b: $out;"; done; ` +
	`[ -n "$v4" ] || { echo "no iptables here queues packets:$errs" >&2; exit 5; }; `

// queueDelay delays the member's egress on the network without netem:
// mesh-delay binds the queue in a long-lived helper, then a one-shot
// sends the packets to it. It has taken effect when the rules are listed
// and the kernel lists the helper as the queue's listener.
func (f *linkFault) queueDelay(ctx context.Context, m *Handle, dev string) error {
	image, err := f.netemImage(ctx)
	if err != nil {
		return err
	}
	queue := strconv.Itoa(delayQueue)
	ready := "mesh-delay: queue " + queue + " bound"
	role := f.c.s.roleName("delayer")
	opts := append(f.c.s.common(role),
		testcontainers.WithCmd("mesh-delay", "-queue", queue, "-delay", f.delay.String()),
		f.helperOf(m),
		testcontainers.WithWaitStrategyAndDeadline(30*time.Second, wait.ForLog(ready)),
	)
	ctr, runErr := testcontainers.Run(ctx, image, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := f.c.s.adopt(ctx, role, ready, 30*time.Second, got, runErr)
	if h != nil {
		f.delayer = h
	}
	if err != nil {
		return err
	}
	script := dev + queueRules +
		`$v4 -w -C ` + delayRule + ` && $v6 -w -C ` + delayRule + ` && ` +
		`awk '$1 == ` + queue + ` { found = 1 } END { exit !found }' /proc/net/netfilter/nfnetlink_queue || ` +
		`{ echo "the kernel lists no listener on queue ` + queue + `" >&2; exit 6; }; echo "$v4 on $dev"`
	code, out, err := f.run(ctx, m, script)
	if err != nil {
		return err
	}
	if code == 5 {
		// Nothing queues: stop the helper, and say the fault cannot be had.
		if err := f.stopDelayer(ctx, m); err != nil {
			return err
		}
		return fmt.Errorf("%w: delay needs the kernel's netem qdisc (sch_netem) or iptables with NFQUEUE, and this machine has neither: %s", ErrFaultUnavailable, strings.TrimSpace(out))
	}
	if code != 0 {
		return fmt.Errorf("%s on %s: queueing its packets to mesh-delay: the helper exited %d: %s", f.Name(), m.role, code, strings.TrimSpace(out))
	}
	v4, on, _ := strings.Cut(strings.TrimSpace(out), " on ")
	f.c.s.narrate("fault: %s on %s: %s queues its packets out of %s to mesh-delay in %s", f.Name(), m.role, v4, on, h.Name())
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
	if f.delayer != nil {
		// Delete every copy of the rule, with either backend, and check
		// that none is left.
		script = dev + `for t in iptables-nft ip6tables-nft iptables-legacy ip6tables-legacy; do ` +
			`if $t -w -L OUTPUT -n >/dev/null 2>&1; then while $t -w -D ` + delayRule + ` 2>/dev/null; do :; done; ` +
			`! $t -w -C ` + delayRule + ` 2>/dev/null || { echo "$t still queues" >&2; exit 1; }; fi; done`
	}
	code, out, err := f.run(ctx, m, script)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("undo %s on %s: the helper exited %d: %s", f.Name(), m.role, code, strings.TrimSpace(out))
	}
	if f.delayer != nil {
		if err := f.stopDelayer(ctx, m); err != nil {
			return err
		}
	}
	// The member itself came through it.
	return waitState(ctx, m, "running", func(s State) bool { return s.Running && s.Status == "running" })
}

// stopDelayer stops mesh-delay, which accepts what it still holds and
// says what it did, and checks that it exited cleanly.
func (f *linkFault) stopDelayer(ctx context.Context, m *Handle) error {
	h := f.delayer
	if err := h.Stop(ctx); err != nil {
		return err
	}
	if err := waitState(ctx, h, "exited", func(s State) bool { return !s.Running && s.Status == "exited" }); err != nil {
		return err
	}
	st, err := h.Inspect(ctx)
	if err != nil {
		return err
	}
	logs, err := h.Logs(ctx)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	last := lines[len(lines)-1]
	if st.ExitCode != 0 || !strings.Contains(last, "mesh-delay: stopping:") {
		return fmt.Errorf("undo %s on %s: %s exited %d; last output:\n%s", f.Name(), m.role, h.role, st.ExitCode, tail(logs, tailLines))
	}
	f.c.s.narrate("fault: %s on %s: %s", f.Name(), m.role, last)
	f.delayer = nil
	return nil
}

// helperOf runs a helper in the member's network namespace, as root, with
// NET_ADMIN.
func (f *linkFault) helperOf(m *Handle) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if err := testcontainers.WithConfigModifier(func(cfg *container.Config) { cfg.User = "0:0" })(req); err != nil {
			return err
		}
		return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = container.NetworkMode("container:" + m.id)
			hc.CapAdd = append(hc.CapAdd, "NET_ADMIN")
		})(req)
	}
}

func (f *linkFault) netemImage(ctx context.Context) (string, error) {
	image, err := f.c.s.builder.EnsureDebian(ctx, images.Netem(images.DebianFromEnv(os.Getenv)))
	if err != nil {
		return "", infra("ensure the netem helper image", err)
	}
	return image, nil
}

// run runs script in mesh-netem, in the member's network namespace.
func (f *linkFault) run(ctx context.Context, m *Handle, script string) (int, string, error) {
	image, err := f.netemImage(ctx)
	if err != nil {
		return 0, "", err
	}
	h, code, err := f.c.s.runOnce(ctx, "netem", image, time.Minute,
		testcontainers.WithCmd("/bin/sh", "-c", script),
		f.helperOf(m),
	)
	if err != nil {
		return 0, "", err
	}
	logs, err := h.Logs(ctx)
	return code, logs, err
}
