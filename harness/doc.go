// Package harness raises a mesh in real containers for the beds and lets
// the step definitions observe it from outside.
//
// Read harness.go first: Mesh is the harness as the steps see it.
//
// A Session is one run: it owns a run id, the labels on everything it
// creates, a work directory and a log directory. A Cluster is what a
// Session raises (RaiseGenesis) from a bed's topology (package topology):
// the private and outside networks, its members (the controller's
// PostgreSQL store where the topology has one, raised before genesis; the
// nats container; the controller container; a host per node, each given a
// token the controller issued; the AMQP broker when asked for), plus the
// one-shot containers run against them (genesis, apply, token issue,
// credential, the AMQP mint, probes, the netem helper, and mesh-delay for a
// delay on a kernel without netem). With a store, every controller
// container is given --store (its URL on the private network, the password
// made for the run). The controller mints both buses and holds every
// credential; the harness mints nothing and reads no credential file: it
// asks the controller (mesh-controller credential) whichever store it
// keeps.
// Faults (faults.go, fault_*.go) break members on purpose and undo it.
//
// testcontainers-go is used with its reaper (Ryuk) disabled, because its
// image cannot be pulled here; the harness owns cleanup instead.
// Session.Close removes every container and network labelled with the run
// id, always; it is idempotent and safe to call concurrently. NewSession
// first removes what runs that died left behind (their mesh.pid process is
// gone from this host). A runner ties Close to SIGINT and SIGTERM so:
//
//	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	s, err := harness.NewSession(ctx, opts)
//	if err != nil { … }
//	release := s.CloseOnCancel(ctx) // Close runs as soon as a signal cancels ctx,
//	defer release()                 // even while the runner is blocked elsewhere
//	defer s.Close(context.WithoutCancel(ctx))
//
// With --keep the runner skips the deferred Close (and still releases);
// Cluster.Describe then says how to reach and remove what is left up.
//
// Failures of the machinery (no Docker engine, an image that would not
// build, a container Docker would not create or start) wrap
// ErrInfrastructure, so a runner can report them apart from failures of
// the product.
package harness
