package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/amqpadmin"
	"github.com/meshbus/mesh/mesh/link/amqpplane"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/printable"
	"github.com/meshbus/mesh/mesh/wire"
)

func costFlag(fs *flag.FlagSet, c *call) {
	fs.IntVar(&c.bcryptCost, "bcrypt-cost", rollout.DefaultBcryptCost,
		"bcrypt cost of the password hashes (the passwords are random; the server pays the cost per connection and per reload)")
}

func checkCost(c *call) error {
	if c.bcryptCost < bcrypt.MinCost || c.bcryptCost > bcrypt.MaxCost {
		return fmt.Errorf("--bcrypt-cost %d is outside %d..%d", c.bcryptCost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	return nil
}

// options are Apply's options as the flags set them. A composition on a
// mesh on AMQP is made live through the broker's management API.
func (c *call) options() rollout.Options {
	return rollout.Options{BcryptCost: c.bcryptCost, Logger: c.log, Bus: c.bus, AMQPAdmin: amqpadmin.ApplyAs, AMQPClients: amqpadmin.ClientsAs, AMQPRetire: amqpadmin.RetireAs}
}

func (c *call) mesh() (*meshdesc.Mesh, error) { return meshdesc.Load(c.meshFile) }

func genesisCmd() command {
	return command{needsMesh: true,
		flags: func(fs *flag.FlagSet, c *call) {
			costFlag(fs, c)
			fs.Func("bus", "the bus the mesh's own traffic is on: nats (default) or amqp (the broker the description's amqp: names)", func(v string) error {
				b, err := rollout.ParseBus(v)
				c.bus = b
				return err
			})
		},
		check: checkCost,
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			res, err := rollout.Genesis(ctx, m, st, c.stateDir, c.options())
			if err != nil {
				return err
			}
			return printJSON(c.stdout, res)
		}}
}

func applyCmd() command {
	return command{needsMesh: true, flags: costFlag, check: checkCost,
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			// Once a description was pushed, the mesh runs that one: an
			// apply of another file would undo the push's users behind the
			// controller's back.
			if _, err := st.Description(ctx); err == nil {
				return fmt.Errorf("the mesh runs a pushed description; send this one with mesh-controller push instead")
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			res, err := rollout.Apply(ctx, m, st, c.stateDir, c.options())
			if err != nil {
				return err
			}
			return printJSON(c.stdout, res)
		}}
}

func adoptCmd() command {
	return command{needsMesh: true,
		flags: func(fs *flag.FlagSet, c *call) {
			fs.StringVar(&c.config, "config", "", "the configuration file the server to adopt watches, as this process reaches it")
			fs.StringVar(&c.monitor, "monitor", "", "its monitoring endpoint, http://host:port (default the description's bus.monitor and bus.monitor_port)")
			fs.DurationVar(&c.within, "within", 30*time.Second, "how long to wait for the server to load each configuration written")
		},
		check: func(c *call) error {
			if c.config == "" {
				return errors.New("--config is required")
			}
			if c.within <= 0 {
				return fmt.Errorf("--within %v must be above 0", c.within)
			}
			return nil
		},
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			res, err := rollout.Adopt(ctx, m, st, c.stateDir, c.options(), rollout.AdoptOptions{Config: c.config, Monitor: c.monitor, LiveWithin: c.within})
			if err != nil {
				return err
			}
			return printJSON(c.stdout, res)
		}}
}

func runCmd() command {
	return command{needsMesh: true,
		flags: func(fs *flag.FlagSet, c *call) {
			fs.DurationVar(&c.eventsAckWait, "events-ack-wait", natsplane.DefaultPolicy().EventsAckWait,
				"on NATS, how long a module has to acknowledge an event before it is delivered again (the modules' consumers are asserted with it)")
			fs.DurationVar(&c.liveEvery, "live-every", rollout.LiveEvery,
				"how often the users and grants are made live on the broker again (a mesh on AMQP), and the compatibility broker's clients counted")
			fs.DurationVar(&c.declareEvery, "declare-every", amqpplane.ResendEvery,
				"on AMQP, how often every node's declaration is put again in its queue (a host that took it and lost it, or a queue emptied, has it again within this)")
		},
		check: func(c *call) error {
			if c.eventsAckWait < time.Second {
				return fmt.Errorf("--events-ack-wait %s: give 1s or more (a module needs time to handle an event)", c.eventsAckWait)
			}
			if c.liveEvery < time.Second {
				return fmt.Errorf("--live-every %s: give 1s or more (each round asks the broker's management API)", c.liveEvery)
			}
			if c.declareEvery < time.Second {
				return fmt.Errorf("--declare-every %s: give 1s or more (each round publishes every node's declaration)", c.declareEvery)
			}
			return nil
		},
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			policy := natsplane.DefaultPolicy()
			policy.EventsAckWait = c.eventsAckWait
			return controller.Run(ctx, m, st, controller.RunOptions{Logger: c.log, Dir: c.stateDir, Apply: c.options(),
				Bus: buses.ControllerOptions{Policy: policy, AMQP: buses.AMQPPolicy{DeclareEvery: c.declareEvery}}, LiveEvery: c.liveEvery})
		}}
}

func statusCmd() command {
	return command{
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.asJSON, "json", false, "print the whole status as JSON")
		},
		do: func(ctx context.Context, c *call, st store.Store) error {
			return printStatus(ctx, c.stdout, st, c.asJSON)
		}}
}

func tokenCmd() command {
	return command{needsMesh: true, args: []string{"NODE"},
		flags: func(fs *flag.FlagSet, c *call) {
			fs.DurationVar(&c.ttl, "ttl", rollout.DefaultTokenTTL, "how long the token may be claimed")
			fs.DurationVar(&c.grace, "grace", store.SpentTokenGrace,
				"how long the token's user stays on the bus once the token is spent or expired, so that its answer or its refusal reaches the node first")
		},
		check: func(c *call) error {
			if c.ttl <= 0 || c.ttl > rollout.MaxTokenTTL {
				return fmt.Errorf("--ttl %s is outside (0, %s]", c.ttl, rollout.MaxTokenTTL)
			}
			if c.grace < time.Second || c.grace > rollout.MaxTokenTTL {
				return fmt.Errorf("--grace %s is outside [1s, %s]", c.grace, rollout.MaxTokenTTL)
			}
			return nil
		},
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			o := c.options()
			o.TokenGrace = c.grace
			_, doc, err := rollout.IssueToken(ctx, m, st, c.stateDir, c.args[0], c.ttl, o)
			if err != nil {
				return err
			}
			_, err = c.stdout.Write(doc)
			return err
		}}
}

func personIssueCmd() command {
	return command{needsMesh: true, args: []string{"NAME"},
		flags: func(fs *flag.FlagSet, c *call) {
			fs.Var(&c.tools, "tools", `the tools the person may call, comma-separated: "<module or seat>.<tool>" or "<module or seat>.*"`)
			fs.BoolVar(&c.admin, "admin", false, "an administrator: every tool the manifests declare")
			fs.StringVar(&c.key, "key", "", "the person's public key (mesh key new prints it): the credential is sealed to it")
		},
		check: func(c *call) error {
			if (len(c.tools) == 0) == !c.admin {
				return errors.New("give --tools LIST or --admin, one of them")
			}
			if c.key == "" {
				return errors.New("--key is required: the person's credential is sealed to it")
			}
			return nil
		},
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			tools := []string(c.tools)
			if c.admin {
				tools = store.Admin
			}
			doc, err := rollout.IssuePerson(ctx, m, st, c.stateDir, c.args[0], tools, c.key, c.options())
			if err != nil {
				return err
			}
			_, err = c.stdout.Write(doc)
			return err
		}}
}

func personRevokeCmd() command {
	return command{needsMesh: true, args: []string{"NAME"},
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			if err := rollout.RevokePerson(ctx, m, st, c.stateDir, c.args[0], c.options()); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.stdout, "person %s revoked\n", c.args[0])
			return err
		}}
}

func personListCmd() command {
	return command{
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.asJSON, "json", false, "print the persons as JSON")
		},
		do: func(ctx context.Context, c *call, st store.Store) error {
			persons, err := st.Persons(ctx)
			if err != nil {
				return err
			}
			if c.asJSON {
				if persons == nil {
					persons = []store.Person{}
				}
				return printJSON(c.stdout, persons)
			}
			if len(persons) == 0 {
				_, err := fmt.Fprintln(c.stdout, "no person issued")
				return err
			}
			for _, p := range persons {
				fmt.Fprintf(c.stdout, "%s: %s (issued %s)\n", p.Name, strings.Join(p.Tools, ", "), p.Issued.UTC().Format(time.RFC3339))
			}
			return nil
		}}
}

// pushCmd sends the description as a push: the running controller
// validates it whole and applies it in one transaction, or changes
// nothing.
func pushCmd() command {
	return command{needsMesh: true,
		do: func(ctx context.Context, c *call, st store.Store) error {
			yaml, err := os.ReadFile(c.meshFile)
			if err != nil {
				return err
			}
			seq, err := rollout.SendPush(ctx, st, yaml)
			if err != nil {
				return err
			}
			return printJSON(c.stdout, struct {
				Seq uint64 `json:"seq"`
			}{seq})
		}}
}

// credentialCmd prints the credential document the store holds for a
// user, byte for byte: how an operator (or the harness) hands a principal
// its credential whichever store the controller keeps.
func credentialCmd() command {
	return command{args: []string{"USER"},
		do: func(ctx context.Context, c *call, st store.Store) error {
			doc, err := st.Credential(ctx, c.args[0])
			if err != nil {
				return err
			}
			_, err = c.stdout.Write(doc)
			return err
		}}
}

func amqpCmd() command {
	return command{needsMesh: true,
		flags: func(fs *flag.FlagSet, c *call) {
			fs.StringVar(&c.addr, "addr", "", "the broker's address in the credentials (host:port)")
			fs.Var(&c.names, "name", "a name of the broker's certificate (repeat; default the host of --addr)")
		},
		check: func(c *call) error {
			host, _, err := net.SplitHostPort(c.addr)
			if err != nil {
				return fmt.Errorf("--addr %q is not host:port", c.addr)
			}
			if len(c.names) == 0 {
				c.names = names{host}
			}
			return nil
		},
		do: func(ctx context.Context, c *call, st store.Store) error {
			m, err := c.mesh()
			if err != nil {
				return err
			}
			b, err := rollout.WriteAMQP(ctx, m, st, c.stateDir, c.addr, rollout.AMQPOptions{Names: c.names})
			if err != nil {
				return err
			}
			return printJSON(c.stdout, struct {
				Users       []string `json:"users"`
				Fingerprint string   `json:"fingerprint"`
			}{b.Users, b.Fingerprint})
		}}
}

// list is a flag of comma-separated values, which may also be given more
// than once.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }

func (l *list) Set(v string) error {
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it == "" {
			return fmt.Errorf("an empty entry in %q", v)
		}
		*l = append(*l, it)
	}
	return nil
}

// names is a flag that may be given more than once.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Set(v string) error {
	if v == "" {
		return errors.New("empty name")
	}
	*n = append(*n, v)
	return nil
}

// printStatus prints the status held in the store: as JSON, or as a line
// per provision its provider keeps failing, which is what a person reading
// it needs first, then a line per node.
// compatStatus is the compatibility broker's retirement condition as
// status shows it.
type compatStatus struct {
	store.Compat
	RetireAfter string `json:"retire_after"`
	Retirable   bool   `json:"retirable"`
}

// compatClients says who is connected, or since when nobody.
func compatClients(c store.Compat) string {
	var parts []string
	for _, u := range slices.Sorted(maps.Keys(c.Connected)) {
		if c.Connected[u] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", esc(u), c.Connected[u]))
		}
	}
	if len(parts) == 0 {
		return "nobody connected since " + c.IdleSince.Format(time.RFC3339)
	}
	return "connected: " + strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// seatStatus is a seat as status shows it.
type seatStatus struct {
	Name     string    `json:"name"`
	Module   string    `json:"module"`
	Server   string    `json:"server"`
	ServerID string    `json:"server_id"`
	Config   string    `json:"config"`
	Adopted  time.Time `json:"adopted"`
}

// personToIssueAgain is a person whose credential names the bus a cutover
// left (rollout.PersonsToIssueAgain), and the command that issues it again.
type personToIssueAgain struct {
	Person  string    `json:"person"`
	Issued  time.Time `json:"issued"`
	Bus     string    `json:"bus"`
	Command string    `json:"command"`
}

func printStatus(ctx context.Context, w io.Writer, kept store.Store, asJSON bool) error {
	if _, err := kept.Secrets(ctx); err != nil {
		return err // no genesis: say so rather than print an empty status
	}
	st, err := kept.Status(ctx)
	if err != nil {
		return err
	}
	nodes, err := status.NodesStatus(ctx, kept, time.Now())
	if err != nil {
		return err
	}
	dead, err := kept.DeadLetters(ctx)
	if err != nil {
		return err
	}
	refused, err := kept.Refusals(ctx)
	if err != nil {
		return err
	}
	builds, err := kept.Builds(ctx)
	if err != nil {
		return err
	}
	installs, err := status.Installations(ctx, kept)
	if err != nil {
		return err
	}
	keptSeats, err := kept.Seats(ctx)
	if err != nil {
		return err
	}
	// What a seat's server was raised with stays in the store: it may
	// hold its operator's passwords.
	seats := []seatStatus{}
	for _, s := range keptSeats {
		seats = append(seats, seatStatus{Name: s.Name, Module: s.Module, Server: s.Server, ServerID: s.ServerID, Config: s.Config, Adopted: s.Adopted})
	}
	var compat *compatStatus
	if c, err := kept.Compat(ctx); err == nil {
		compat = &compatStatus{Compat: c, RetireAfter: c.RetireAfter.String(), Retirable: c.Retirable()}
		if compat.Connected == nil {
			compat.Connected = map[string]int{}
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	var cut *store.Cutover
	issueAgain := []personToIssueAgain{}
	var toIssue []store.Person
	if c, err := kept.Cutover(ctx); err == nil {
		cut = &c
		if toIssue, err = rollout.PersonsToIssueAgain(ctx, kept, c); err != nil {
			return err
		}
		for _, p := range toIssue {
			issueAgain = append(issueAgain, personToIssueAgain{Person: p.Name, Issued: p.Issued, Bus: c.From, Command: rollout.IssueAgainCommand(p)})
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if asJSON {
		if builds == nil {
			builds = []store.Build{}
		}
		if installs == nil {
			installs = []status.Installation{}
		}
		return printJSON(w, struct {
			store.Status
			Nodes         []status.NodeStatus   `json:"nodes"`
			Dead          []store.DeadLetter    `json:"dead_letters"`
			Refusals      store.Refusals        `json:"refusals"`
			Builds        []store.Build         `json:"builds"`
			Installations []status.Installation `json:"installations"`
			Seats         []seatStatus          `json:"seats"`
			Compat        *compatStatus         `json:"compat,omitempty"`
			Cutover       *store.Cutover        `json:"cutover,omitempty"`
			IssueAgain    []personToIssueAgain  `json:"issue_again"`
		}{st, nodes, dead, refused, builds, installs, seats, compat, cut, issueAgain})
	}
	if compat != nil {
		fmt.Fprintf(w, "compatibility broker %s, as of %s: %s; retirable after %s with nobody connected: %s\n",
			esc(compat.Module), compat.Checked.Format(time.RFC3339), compatClients(compat.Compat), compat.RetireAfter, yesNo(compat.Retirable))
	}
	for _, s := range seats {
		fmt.Fprintf(w, "seat %s: module %s, the server %s at %s adopted %s (its configuration %s)\n",
			esc(s.Name), esc(s.Module), esc(s.ServerID), esc(s.Server), s.Adopted.Format(time.RFC3339), esc(s.Config))
	}
	if cut != nil {
		printCutover(w, *cut, toIssue)
	}
	if len(st.Failing) == 0 {
		fmt.Fprintln(w, "no provision is failing")
	} else {
		fmt.Fprintf(w, "%d provision(s) failing:\n", len(st.Failing))
	}
	for _, f := range st.Failing {
		fmt.Fprintf(w, "  %s fails %s on %s: %s since %s (said %s by %s, event %s)\n",
			esc(f.Provider), esc(f.Consumer), esc(f.Node), esc(f.Class), f.Since.Format(time.RFC3339), f.Said.Format(time.RFC3339), esc(f.ReportedBy), esc(f.EventID))
	}
	if len(nodes) > 0 {
		fmt.Fprintf(w, "%d node(s):\n", len(nodes))
	}
	for _, n := range nodes {
		fmt.Fprintf(w, "  %s\n", nodeLine(n))
	}
	if len(dead) > 0 {
		fmt.Fprintf(w, "%d dead letter(s):\n", len(dead))
	}
	for _, d := range dead {
		fmt.Fprintf(w, "  module %s on %s (consumer %s) gave up on event %s (%s, EVENTS sequence %d) after %d deliveries, at %s\n",
			esc(d.Module), esc(d.Node), esc(d.Consumer), esc(d.EventID), esc(d.Subject), d.StreamSeq, d.Deliveries, d.At.UTC().Format(time.RFC3339))
	}
	printBuilds(w, builds)
	if len(installs) > 0 {
		fmt.Fprintf(w, "%d installation(s):\n", len(installs))
	}
	for _, in := range installs {
		line := fmt.Sprintf("  %s on %s: %s@%s (%s): %s", esc(in.Module), esc(in.Node), esc(in.Repo), esc(in.Revision), esc(in.Artifact), esc(in.Outcome))
		if in.Reason != "" {
			line += ": " + esc(in.Reason)
		}
		fmt.Fprintln(w, line)
	}
	printRefusals(w, refused)
	return nil
}

// printBuilds says each build asked for and what became of it.
func printBuilds(w io.Writer, builds []store.Build) {
	if len(builds) == 0 {
		return
	}
	fmt.Fprintf(w, "%d build(s):\n", len(builds))
	for _, b := range builds {
		switch b.Outcome {
		case "":
			fmt.Fprintf(w, "  %s: asked %s, not built yet\n", esc(b.ID), b.Asked.UTC().Format(time.RFC3339))
		case wire.BuildSucceeded:
			fmt.Fprintf(w, "  %s: built %s (%d bytes) by %s at %s\n", esc(b.ID), esc(b.Digest), b.Size, esc(b.Builder), b.Built.UTC().Format(time.RFC3339))
		default:
			fmt.Fprintf(w, "  %s: %s: %s (by %s at %s)\n", esc(b.ID), esc(b.Outcome), esc(b.Error), esc(b.Builder), b.Built.UTC().Format(time.RFC3339))
		}
	}
}

// esc is a field of the status fit for the operator's terminal: reports,
// refusals, builds and installations carry what hosts, builders and
// publishers wrote, and a terminal acts on control sequences (clear the
// screen, set the title, write the clipboard) and bidi overrides printed
// raw (issue 18).
func esc(s string) string { return printable.Line(s) }

// shownRefusals is how many of the newest refusals the text status lists
// (--json has every one the store keeps).
const shownRefusals = 5

// printRefusals says how many CONTROL messages were refused, of which
// kinds, and the newest of them with their reasons.
func printRefusals(w io.Writer, r store.Refusals) {
	if r.Total() == 0 {
		return
	}
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(r.Counts)) {
		kinds = append(kinds, fmt.Sprintf("%s %d", esc(k), r.Counts[k]))
	}
	fmt.Fprintf(w, "%d CONTROL message(s) refused (%s); the newest:\n", r.Total(), strings.Join(kinds, ", "))
	for _, x := range r.Last[max(0, len(r.Last)-shownRefusals):] {
		fmt.Fprintf(w, "  %s %s %s: %s\n", x.At.UTC().Format(time.RFC3339), esc(x.Kind), esc(x.Key), esc(x.Reason))
	}
}

// nodeLine says a node's state in one line.
func nodeLine(n status.NodeStatus) string {
	parts := []string{esc(n.Node)}
	if n.Enrolled.IsZero() {
		parts = append(parts, "not enrolled")
	}
	rollout := fmt.Sprintf("declared revision %d, applied %d", n.Declared, n.Applied)
	if n.RolledOut() {
		rollout += " (rolled out)"
	} else if n.Declared != 0 {
		rollout += " (rolling out)"
	}
	parts = append(parts, rollout)
	if len(n.Running) > 0 {
		var run []string
		for _, m := range slices.Sorted(maps.Keys(n.Running)) {
			run = append(run, esc(m)+" "+esc(n.Running[m]))
		}
		parts = append(parts, "running "+strings.Join(run, ", "))
	}
	if !n.LastReport.IsZero() {
		on := ""
		if n.Bus != "" {
			on = " on " + esc(n.Bus)
		}
		parts = append(parts, "last report"+on+" "+n.LastReport.UTC().Format(time.RFC3339))
	}
	if n.Refused != "" {
		parts = append(parts, "refused: "+esc(n.Refused))
	}
	switch {
	case n.QuietUnknown != "":
		parts = append(parts, "quiet: unknown ("+esc(n.QuietUnknown)+")")
	case n.Quiet:
		parts = append(parts, "QUIET")
	default:
		parts = append(parts, "heard "+n.Heard.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, "; ")
}
