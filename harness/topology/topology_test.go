package topology

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTheBedsTopologiesAreValid(t *testing.T) {
	for name, top := range map[string]Topology{"genesis": Genesis(), "with amqp": Genesis().WithAMQP(), "living": Living(), "living on amqp": LivingOnAMQP(), "living with its build path": Living().WithBuildPath(), "living on amqp with its build path": LivingOnAMQP().WithBuildPath(), "adoption": Adoption()} {
		if err := top.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := Genesis().WithAMQP().String(); got != "bus (nats) on private, outside\ncontroller (controller) on private\namqp (rabbitmq) on private, raised when a step asks" {
		t.Errorf("String:\n%s", got)
	}
	if got := Living().String(); got != "store (postgres) on private\nbus (nats) on private, outside\ncontroller (controller) on private\nnode-a (host) on private\nnode-b (host) on private\nmodules (source) on private, raised when a step asks\nbuilder (builder) on private, raised when a step asks" {
		t.Errorf("String:\n%s", got)
	}
	if got := Living().WithBuildPath().String(); !strings.HasSuffix(got, "\nmodules (source) on private\nbuilder (builder) on private") {
		t.Errorf("expected the build path raised with the cluster, got String:\n%s", got)
	}
	if !Living().Members[5].OnDemand {
		t.Error("WithBuildPath changed the topology it was called on")
	}
	if !Living().Has(KindPostgres) || Genesis().Has(KindPostgres) || len(Living().OfKind(KindHost)) != 2 {
		t.Error("Has/OfKind do not see the living topology's store and hosts")
	}
	if got := LivingOnAMQP().String(); !strings.HasPrefix(got, "the mesh on amqp\nstore (postgres) on private\namqp (rabbitmq) on private\n") {
		t.Errorf("String:\n%s", got)
	}
	if Living().MeshBus() != BusNATS || LivingOnAMQP().MeshBus() != BusAMQP {
		t.Error("expected living on nats and living on amqp on their buses")
	}
	if len(Genesis().Members) != 2 {
		t.Error("WithAMQP changed the topology it was called on")
	}
	graced := Living().WithTokenGrace(10 * time.Second).WithControllerArgs("--live-every=5s").WithAMQP()
	if graced.TokenGrace != 10*time.Second || !strings.HasSuffix(graced.String(), "\ntokens issued with a grace of 10s") {
		t.Errorf("expected the token grace kept through the other With, and shown, got %s:\n%s", graced.TokenGrace, graced)
	}
	if Living().TokenGrace != 0 {
		t.Error("WithTokenGrace changed the topology it was called on")
	}
}

func TestABadTopologyIsRefusedNamingWhatIsValid(t *testing.T) {
	for name, c := range map[string]struct {
		top  Topology
		want string
	}{
		"empty":                         {Topology{}, "no members"},
		"unknown kind":                  {Topology{Members: []Member{{Name: "bus", Kind: "nats", Networks: []string{Private}}, {Name: "db", Kind: "mysql", Networks: []string{Private}}}}, `unknown kind "mysql" (the harness runs: postgres, nats, rabbitmq, predecessor, controller, host, source, builder)`},
		"two stores":                    {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}, {Name: "s1", Kind: KindPostgres, Networks: []string{Private}}, {Name: "s2", Kind: KindPostgres, Networks: []string{Private}}}}, "the controller has one store"},
		"host alone":                    {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}, {Name: "node-a", Kind: KindHost, Networks: []string{Private}}}}, "need a member of kind controller and one of kind nats"},
		"nats later beside nats":        {Topology{Members: []Member{{Name: "amqp", Kind: KindRabbitMQ, Networks: []string{Private}}, {Name: "bus", Kind: KindNATS, Networks: []string{Private}, OnDemand: true}}}, "carries the mesh (bus nats)"},
		"store later":                   {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}, {Name: "store", Kind: KindPostgres, Networks: []string{Private}, OnDemand: true}}}, "raised with the cluster, not on demand"},
		"no bus":                        {Topology{Members: []Member{{Name: "controller", Kind: KindController, Networks: []string{Private}}}}, "nothing can run without the bus"},
		"twice":                         {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}, {Name: "bus", Kind: KindController, Networks: []string{Private}}}}, "named twice"},
		"off private":                   {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Outside}}}}, "every member is on the private network"},
		"unknown net":                   {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private, "dmz"}}}}, `unknown network "dmz" (valid: private, outside)`},
		"two servers":                   {Topology{Members: []Member{{Name: "a", Kind: KindNATS, Networks: []string{Private}}, {Name: "b", Kind: KindNATS, Networks: []string{Private}}}}, "raises one server yet"},
		"amqp bus on demand":            {Topology{Bus: BusAMQP, Members: []Member{{Name: "amqp", Kind: KindRabbitMQ, Networks: []string{Private}, OnDemand: true}}}, "carries the mesh (bus amqp): it is raised with the cluster"},
		"amqp bus missing":              {Topology{Bus: BusAMQP, Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}}}, "no member of kind rabbitmq: nothing can run without the bus (the mesh is on amqp)"},
		"unknown bus":                   {Topology{Bus: "kafka", Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}}}, `bus "kafka": unknown (valid: nats, amqp)`},
		"amqp host alone":               {Topology{Bus: BusAMQP, Members: []Member{{Name: "amqp", Kind: KindRabbitMQ, Networks: []string{Private}}, {Name: "node-a", Kind: KindHost, Networks: []string{Private}}}}, "need a member of kind controller and one of kind rabbitmq"},
		"builder alone":                 {Topology{Bus: BusAMQP, Members: []Member{{Name: "amqp", Kind: KindRabbitMQ, Networks: []string{Private}}, {Name: "b", Kind: KindBuilder, Networks: []string{Private}}}}, "need a member of kind controller and one of kind rabbitmq"},
		"predecessor alone":             {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}, {Name: "p", Kind: KindPredecessor, Networks: []string{Private}}}}, "needs a member of kind rabbitmq raised with the cluster"},
		"predecessor, broker on demand": {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}, {Name: "amqp", Kind: KindRabbitMQ, Networks: []string{Private}, OnDemand: true}, {Name: "p", Kind: KindPredecessor, Networks: []string{Private}}}}, "needs a member of kind rabbitmq raised with the cluster"},
		"grace below zero":              {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}}, TokenGrace: -time.Second}, "a token's grace of -1s"},
		"two controller":                {Topology{Members: []Member{{Name: "bus", Kind: KindNATS, Networks: []string{Private}}, {Name: "c1", Kind: KindController, Networks: []string{Private}}, {Name: "c2", Kind: KindController, Networks: []string{Private}}}}, "one controller"},
	} {
		err := c.top.Check()
		if !errors.Is(err, ErrBadTopology) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: expected ErrBadTopology naming %q, got %v", name, c.want, err)
		}
	}
}
