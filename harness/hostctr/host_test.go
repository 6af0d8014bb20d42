package hostctr

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/meshbus/mesh/harness/images"
)

// TestTheOptionsPutTheTokenAndTheStateWhereTheImageLooks: the paths are
// the ones the image's default command names, the token is staged as
// given, and the wait is for the host's own readiness line.
func TestTheOptionsPutTheTokenAndTheStateWhereTheImageLooks(t *testing.T) {
	cmd := strings.Join(images.Host().Cmd, " ")
	for _, p := range []string{"--token=" + TokenFile, "--state=" + StateDir} {
		if !strings.Contains(cmd, p) {
			t.Errorf("the image's command %q does not say %s", cmd, p)
		}
	}
	req := testcontainers.GenericContainerRequest{}
	for _, o := range []testcontainers.ContainerCustomizer{WithToken([]byte(`{"url":"tls://x"}`)), WithStateDir("/tmp/node-a"), WithStartupTimeout(7 * time.Second)} {
		if err := o.Customize(&req); err != nil {
			t.Fatal(err)
		}
	}
	if len(req.Files) != 1 || req.Files[0].ContainerFilePath != TokenFile || req.Files[0].FileMode != 0o600 {
		t.Fatalf("files %+v", req.Files)
	}
	if b, _ := io.ReadAll(req.Files[0].Reader); string(b) != `{"url":"tls://x"}` {
		t.Errorf("token staged as %q", b)
	}
	if req.HostConfigModifier == nil {
		t.Fatal("no bind of the state directory")
	}
	h := &container.HostConfig{}
	req.HostConfigModifier(h)
	if !slices.Contains(h.Binds, "/tmp/node-a:"+StateDir) {
		t.Errorf("binds %q", h.Binds)
	}
	multi, ok := req.WaitingFor.(*wait.MultiStrategy)
	if !ok || len(multi.Strategies) != 1 {
		t.Fatalf("waiting for %#v, want the log %s alone", req.WaitingFor, ReadyLog)
	}
	if w, ok := multi.Strategies[0].(*wait.LogStrategy); !ok || w.Log != ReadyLog {
		t.Errorf("waiting for %#v, want the log %s", multi.Strategies[0], ReadyLog)
	}
	if ReadyLog != `"msg":"ready"` {
		t.Errorf("ReadyLog %s", ReadyLog)
	}
}
