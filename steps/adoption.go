package steps

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// The adoption (design 25 §9 step 2, docs/decisions/0012-adoption.md):
// a NATS server raised beside the broker of a mesh on AMQP by its
// operator, adopted in place into seat mesh-broker. Every check reads the
// server (its monitoring, a client of the operator's own user), the
// controller's status or the file the server watches.

// adoption is what the adoption steps keep of the cluster's server.
type adoption struct {
	beside harness.NATSBeside
	raised []byte // its configuration before the adoption
	varz   observe.Varz
}

func (s *scenario) bindAdoption(sc *godog.ScenarioContext) {
	sc.Step(`^the operator raises a NATS server beside the broker, with a configuration of its own and a stream "([^"]+)" of (\d+) messages$`, s.theOperatorRaisesNATSBeside)
	sc.Step(`^the operator adopts it into its seat$`, s.theOperatorAdopts)
	sc.Step(`^the NATS server beside the broker was adopted into its seat$`, s.besideAdopted)
	sc.Step(`^the stream "([^"]+)" on it still holds its (\d+) messages$`, s.theStreamStillHolds)
	sc.Step(`^its configuration keeps what it was raised with, the mesh's accounts beside its own$`, s.itsConfigurationKeeps)
	sc.Step(`^status shows seat "([^"]+)" held by the module "([^"]+)", the server adopted$`, s.statusShowsTheSeat)
	sc.Step(`^adopting it again is refused, saying "([^"]+)", and the seat is as it was$`, s.adoptingAgainIsRefused)
	sc.Step(`^adopting a server where none answers is refused, saying "([^"]+)"$`, s.adoptingWhereNoneAnswers)
	sc.Step(`^a push that assigns the module "([^"]+)" to "([^"]+)" as well is refused, saying "([^"]+)", and the adopted server's configuration has no user of that placement$`, s.aPushAssigningTheSeatIsRefused)
	sc.Step(`^I note the adopted server's message counts$`, s.iNoteTheAdoptedServersCounts)
	sc.Step(`^no principal of the mesh has ever connected to the adopted server$`, s.noMeshPrincipalConnected)
	sc.Step(`^the adopted server's message counts have not grown$`, s.theAdoptedServersCountsHaveNotGrown)
}

// beside raises the server, or returns the one raised. A cluster with a
// server beside its broker, adopted or about to be, is not leased again:
// a scenario that expects none (adopting where none answers), or the
// server as the operator raised it, gets one without.
func (s *scenario) beside(ctx context.Context) (harness.NATSBeside, harness.NATSBesideRaiser, error) {
	r, err := s.cluster()
	if err != nil {
		return harness.NATSBeside{}, nil, err
	}
	nb, ok := r.cluster.(harness.NATSBesideRaiser)
	if !ok {
		return harness.NATSBeside{}, nil, fmt.Errorf("this cluster cannot raise a NATS server beside its broker")
	}
	r.tainted = true
	b, err := nb.RaiseNATSBeside(ctx)
	return b, nb, err
}

// asOperator connects to the server beside as the operator's own user.
func (s *scenario) asOperator(ctx context.Context, b harness.NATSBeside) (*nats.Conn, error) {
	addr, err := s.r.cluster.BusAddress(ctx)
	if err != nil {
		return nil, err
	}
	return nats.Connect("tls://"+addr, nats.UserInfo(harness.BesideUser, b.Password),
		nats.Secure(link.PinnedTLS(b.Fingerprint, "localhost")), nats.Timeout(5*time.Second))
}

func (s *scenario) theOperatorRaisesNATSBeside(ctx context.Context, stream string, n int) error {
	b, nb, err := s.beside(ctx)
	if err != nil {
		return err
	}
	if s.ad.raised, err = nb.ReadNATSBesideConfig(); err != nil {
		return err
	}
	s.ad.beside = b
	nc, err := s.asOperator(ctx, b)
	if err != nil {
		return fmt.Errorf("expected the operator's user let in by the server raised beside the broker: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{strings.ToLower(stream) + ".>"}})
	if err != nil {
		return fmt.Errorf("the operator's stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	for i := info.State.Msgs; i < uint64(n); i++ {
		if _, err := js.Publish(ctx, strings.ToLower(stream)+".entry", fmt.Appendf(nil, "entry %d", i)); err != nil {
			return err
		}
	}
	return nil
}

// adopt runs mesh-controller adopt on the server beside, asked at
// monitor ("" the description's); it returns what it printed and its
// exit.
func (s *scenario) adopt(ctx context.Context, monitor string) (string, int, error) {
	r, err := s.cluster()
	if err != nil {
		return "", -1, err
	}
	nb, ok := r.cluster.(harness.NATSBesideRaiser)
	if !ok {
		return "", -1, fmt.Errorf("this cluster has no NATS server beside its broker to adopt")
	}
	return nb.AdoptBeside(ctx, monitor)
}

func (s *scenario) theOperatorAdopts(ctx context.Context) error {
	start := time.Now()
	out, exit, err := s.adopt(ctx, "")
	if err != nil {
		return err
	}
	if exit != 0 {
		return fmt.Errorf("expected the adoption to succeed, mesh-controller adopt exited %d:\n%s", exit, out)
	}
	beds.Measure(ctx, "adoption: command → seat recorded and configuration live", time.Since(start))
	return nil
}

// besideAdopted raises and adopts the server unless a step before did.
func (s *scenario) besideAdopted(ctx context.Context) error {
	if err := s.theOperatorRaisesNATSBeside(ctx, "LEDGER", 3); err != nil {
		return err
	}
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	if len(st.Seats) > 0 {
		return nil
	}
	return s.theOperatorAdopts(ctx)
}

func (s *scenario) theStreamStillHolds(ctx context.Context, stream string, n int) error {
	nc, err := s.asOperator(ctx, s.ad.beside)
	if err != nil {
		return fmt.Errorf("expected the operator's user still let in after the adoption: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("expected the stream %s the operator wrote before the adoption, got %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs != uint64(n) {
		return fmt.Errorf("expected %s to hold %d messages, got %d", stream, n, info.State.Msgs)
	}
	return nil
}

func (s *scenario) itsConfigurationKeeps(ctx context.Context) error {
	_, nb, err := s.beside(ctx)
	if err != nil {
		return err
	}
	now, err := nb.ReadNATSBesideConfig()
	if err != nil {
		return err
	}
	was, err := conf.Parse(string(s.ad.raised))
	if err != nil {
		return fmt.Errorf("the configuration the server was raised with: %w", err)
	}
	is, err := conf.Parse(string(now))
	if err != nil {
		return fmt.Errorf("expected a configuration nats-server reads, got %w:\n%s", err, now)
	}
	for k, v := range was {
		if k == "accounts" {
			continue
		}
		if a, b := fmt.Sprint(v), fmt.Sprint(is[k]); a != b {
			return fmt.Errorf("expected %s kept as it was raised, %s, got %s", k, a, b)
		}
	}
	accounts, _ := is["accounts"].(map[string]any)
	want := []string{harness.BesideAccount, wire.AccountControl, wire.AccountMesh, wire.AccountEnrol, wire.AccountHosts, wire.AccountSources}
	if got := slices.Sorted(maps.Keys(accounts)); !equalSets(got, want) {
		return fmt.Errorf("expected the accounts %v, got %v", want, got)
	}
	// And the server runs it: it loaded a configuration after it started.
	v, err := s.readVarz(ctx)
	if err != nil {
		return err
	}
	if !v.ConfigLoadTime.After(v.Start) || v.ServerName != harness.BesideName {
		return fmt.Errorf("expected the server %s to have loaded a configuration since it started (%s), it last loaded at %s", harness.BesideName, v.Start, v.ConfigLoadTime)
	}
	return nil
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func (s *scenario) statusShowsTheSeat(ctx context.Context, seat, module string) error {
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	for _, got := range st.Seats {
		if got.Name == seat && got.Module == module && got.Config == s.ad.beside.Config && !got.Adopted.IsZero() && got.ServerID != "" {
			return nil
		}
	}
	return fmt.Errorf("expected status to show seat %s held by %s, adopted from %s, got %+v", seat, module, s.ad.beside.Config, st.Seats)
}

// adoptingAgainIsRefused: the configuration itself may change meanwhile
// for reasons of its own (a spent token's user leaves it after its
// grace), so what must stay is the seat: the same server, adopted when
// it was.
func (s *scenario) adoptingAgainIsRefused(ctx context.Context, saying string) error {
	before, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	out, exit, err := s.adopt(ctx, "")
	if err != nil {
		return err
	}
	if exit != 1 || !strings.Contains(out, saying) {
		return fmt.Errorf("expected adopt refused (exit 1) saying %q, exit %d:\n%s", saying, exit, out)
	}
	after, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	if fmt.Sprint(after.Seats) != fmt.Sprint(before.Seats) {
		return fmt.Errorf("expected the seat as it was, %+v, got %+v", before.Seats, after.Seats)
	}
	return nil
}

func (s *scenario) adoptingWhereNoneAnswers(ctx context.Context, saying string) error {
	// Nothing listens at the broker's host on the bus's monitoring port.
	out, exit, err := s.adopt(ctx, fmt.Sprintf("http://%s:%d", harness.AliasAMQP, s.r.mesh.Bus.MonitorPort))
	if err != nil {
		return err
	}
	if exit != 1 || !strings.Contains(out, saying) {
		return fmt.Errorf("expected adopt refused (exit 1) saying %q, exit %d:\n%s", saying, exit, out)
	}
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	if len(st.Seats) != 0 {
		return fmt.Errorf("expected no seat recorded by a refused adoption, status shows %+v", st.Seats)
	}
	return nil
}

func (s *scenario) aPushAssigningTheSeatIsRefused(ctx context.Context, module, node, saying string) error {
	_, nb, err := s.beside(ctx)
	if err != nil {
		return err
	}
	m := *s.r.mesh
	m.Nodes = slices.Clone(m.Nodes)
	i := slices.IndexFunc(m.Nodes, func(n meshdesc.Node) bool { return n.Name == node })
	if i < 0 {
		return fmt.Errorf("no node %q in the description", node)
	}
	m.Nodes[i].Modules = append(slices.Clone(m.Nodes[i].Modules), module)
	// A refused push changes nothing, which this step checks: the
	// cluster stays as fit for the next scenario as it was.
	tainted, mesh := s.r.tainted, s.ro.mesh
	if err := s.pushMesh(ctx, &m, "mesh-seat-twice.yaml"); err != nil {
		return err
	}
	// The running controller refuses it; status counts the refusal.
	err = eventually(ctx, 15*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		for _, x := range st.Refusals.Last {
			if x.Kind == store.RefusedPush && strings.Contains(x.Reason, saying) {
				return nil
			}
		}
		return fmt.Errorf("expected status to show the push refused saying %q, it shows %+v", saying, st.Refusals.Last)
	})
	if err != nil {
		return err
	}
	s.r.tainted, s.ro.mesh = tainted, mesh
	// Applied, it would have composed a user for the placement.
	now, err := nb.ReadNATSBesideConfig()
	if err != nil {
		return err
	}
	if user := wire.ModuleUser(node, module); strings.Contains(string(now), fmt.Sprintf("%q", user)) {
		return fmt.Errorf("expected no user %s in the adopted server's configuration, it has one", user)
	}
	return nil
}

func (s *scenario) iNoteTheAdoptedServersCounts(ctx context.Context) error {
	v, err := s.readVarz(ctx)
	s.ad.varz = v
	beds.Logf(ctx, "the adopted server before: in %d, out %d messages", v.InMsgs, v.OutMsgs)
	return err
}

func (s *scenario) theAdoptedServersCountsHaveNotGrown(ctx context.Context) error {
	v, err := s.readVarz(ctx)
	if err != nil {
		return err
	}
	beds.Logf(ctx, "the adopted server after: in %d, out %d messages", v.InMsgs, v.OutMsgs)
	if v.InMsgs != s.ad.varz.InMsgs || v.OutMsgs != s.ad.varz.OutMsgs {
		return fmt.Errorf("expected no message through the adopted server, its counts went from in %d out %d to in %d out %d",
			s.ad.varz.InMsgs, s.ad.varz.OutMsgs, v.InMsgs, v.OutMsgs)
	}
	return nil
}

func (s *scenario) noMeshPrincipalConnected(ctx context.Context) error {
	body, err := s.monitor(ctx, observe.ConnzURL(s.r.mesh.Bus.Monitor, s.r.mesh.Bus.MonitorPort, "all"))
	if err != nil {
		return err
	}
	users, err := observe.ConnectedUsers(body)
	if err != nil {
		return err
	}
	beds.Logf(ctx, "users ever connected to the adopted server: %v", users)
	for _, u := range users {
		if u != harness.BesideUser {
			return fmt.Errorf("expected no principal of the mesh ever connected to the adopted server, /connz shows %v", users)
		}
	}
	return nil
}
