package buses

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestASchemeOfNoBusIsRefused: a credential whose URL names no bus is
// refused at once, naming the scheme, and nothing is dialled.
func TestASchemeOfNoBusIsRefused(t *testing.T) {
	ctx := context.Background()
	other := wire.Credential{URL: "http://host.node-a:pw@bus:80", Principal: wire.PrincipalHost, Node: "node-a"}
	if _, err := DialHost(ctx, other); !errors.Is(err, plane.ErrUnsupported) {
		t.Fatalf("expected a scheme of no bus refused, got %v", err)
	}
	asked := false
	if _, err := Enrol(ctx, other, func(string) []byte { asked = true; return nil }); !errors.Is(err, plane.ErrUnsupported) || asked {
		t.Fatalf("expected an enrolment on no bus refused before any request, got %v (asked %v)", err, asked)
	}
	if _, err := DialController(ctx, other, other, ControllerOptions{}); !errors.Is(err, plane.ErrUnsupported) {
		t.Fatalf("expected a controller on no bus refused, got %v", err)
	}
}

// TestTheControllersCredentialsMustNameOneBus: a controller given a
// credential on NATS and one on AMQP is refused before dialling.
func TestTheControllersCredentialsMustNameOneBus(t *testing.T) {
	nats := wire.Credential{URL: "tls://controller:pw@nats:4222", Principal: wire.PrincipalController}
	amqp := wire.Credential{URL: wire.AMQPBusURL("controller.mesh", "pw", "rabbitmq:5671"), Principal: wire.PrincipalController}
	if _, err := DialController(context.Background(), nats, amqp, ControllerOptions{}); !errors.Is(err, plane.ErrUnsupported) {
		t.Fatalf("expected credentials on two buses refused, got %v", err)
	}
}

func TestAFirstDialIsTriedAgainUnlessTheServerOrTheBusIsWrong(t *testing.T) {
	for err, again := range map[error]bool{
		fmt.Errorf("connect: %w", plane.ErrLoginRefused):         true,
		errors.New("dial bus at nats:4222: connection refused"):  true,
		fmt.Errorf("dial: %w", link.ErrFingerprint):              false,
		fmt.Errorf("the builder on x: %w", plane.ErrUnsupported): false,
		nil: false,
	} {
		if got := DialAgain(err); got != again {
			t.Errorf("DialAgain(%v): expected %v, got %v", err, again, got)
		}
	}
}
