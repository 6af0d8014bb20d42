package buses

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestTheHostOnAMQPIsNotCarriedYet: until amqpplane exists, a host's or
// a token's credential for AMQP is refused at once, naming the flow, and
// nothing is dialled; a scheme of no bus is refused too.
func TestTheHostOnAMQPIsNotCarriedYet(t *testing.T) {
	ctx := context.Background()
	host := wire.Credential{URL: wire.AMQPBusURL("host.node-a", "pw", "rabbitmq:5671"), Principal: wire.PrincipalHost, Node: "node-a"}
	if _, err := DialHost(ctx, host); !errors.Is(err, plane.ErrUnsupported) || !strings.Contains(err.Error(), "host") {
		t.Fatalf("expected the host's side on AMQP unsupported, got %v", err)
	}
	token := wire.Credential{URL: wire.AMQPBusURL("enrol.tok-1", "pw", "rabbitmq:5671"), Principal: wire.PrincipalEnrol, Name: "tok-1"}
	asked := false
	if _, err := Enrol(ctx, token, func(string) []byte { asked = true; return nil }); !errors.Is(err, plane.ErrUnsupported) || !strings.Contains(err.Error(), "enrolment") || asked {
		t.Fatalf("expected enrolment on AMQP unsupported before any request, got %v (asked %v)", err, asked)
	}
	other := wire.Credential{URL: "http://host.node-a:pw@bus:80"}
	if _, err := DialHost(ctx, other); !errors.Is(err, plane.ErrUnsupported) {
		t.Fatalf("expected a scheme of no bus refused, got %v", err)
	}
}
