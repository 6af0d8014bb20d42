package steps

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestADialCutInItsHandshakeIsMadeAgainARefusalIsNot: a connection the
// port's proxy closed under a lossy link is the transport's failure, and
// dial tries again; a login refused is the answer, and it does not.
func TestADialCutInItsHandshakeIsMadeAgainARefusalIsNot(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("dial bus as controller.mesh: %w", fmt.Errorf("%w: %w", nats.ErrTLS, io.EOF)), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{fmt.Errorf("dial: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("dial bus at 127.0.0.1:34485 as controller.mesh: %w", errors.New("nats: expected 'PONG', got 'PING'")), true},
		{fmt.Errorf("dial: %w", errors.New("nats: expected 'PONG', got '-ERR 'Authorization Violation''")), false},
		{fmt.Errorf("dial bus as carol: %w", nats.ErrAuthorization), false},
		{errors.New("nats: no servers available for connection"), false},
	} {
		if got := cutInHandshake(c.err); got != c.want {
			t.Errorf("%v: expected %v, got %v", c.err, c.want, got)
		}
	}
}
