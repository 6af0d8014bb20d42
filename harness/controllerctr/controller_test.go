package controllerctr

import (
	"slices"
	"testing"

	"github.com/testcontainers/testcontainers-go"
)

func TestStoreArgsGiveEveryCommandTheStoreWhereItTakesIt(t *testing.T) {
	const url = "postgres://mesh:pw@store:5432/mesh?sslmode=disable"
	for name, c := range map[string]struct{ in, want []string }{
		"run keeps its state":         {Args("run", "mesh.yaml"), []string{"run", "--store", url, "--mesh", "/mesh/mesh.yaml", "--state", StateDir}},
		"credential trades its state": {[]string{"credential", "--state", StateDir, "host.node-a"}, []string{"credential", "--store", url, "host.node-a"}},
		"status --state=":             {[]string{"status", "--state=" + StateDir, "--json"}, []string{"status", "--store", url, "--json"}},
		"status as JSON":              {StatusArgs(), []string{"status", "--json", "--store", url}},
		"a store already named":       {[]string{"status", "--store", "postgres://other"}, []string{"status", "--store", "postgres://other"}},
	} {
		if got := StoreArgs(c.in, url); !slices.Equal(got, c.want) {
			t.Errorf("%s: StoreArgs(%q)\n = %q\nwant %q", name, c.in, got, c.want)
		}
	}
	token := []string{"token", "issue", "--mesh", "/mesh/mesh.yaml", "--state", StateDir, "node-a"}
	want := []string{"token", "issue", "--store", url, "--mesh", "/mesh/mesh.yaml", "--state", StateDir, "node-a"}
	if got := StoreArgs(token, url); !slices.Equal(got, want) {
		t.Errorf("StoreArgs(%q)\n = %q\nwant %q", token, got, want)
	}
	if got := StoreArgs(token, ""); !slices.Equal(got, token) {
		t.Errorf("without a store the args changed: %q", got)
	}
}

func TestWithStoreRewritesTheCommandGivenBeforeIt(t *testing.T) {
	req := testcontainers.GenericContainerRequest{}
	for _, o := range []testcontainers.ContainerCustomizer{testcontainers.WithCmd(Args("genesis", "mesh.yaml")...), WithStore("postgres://x")} {
		if err := o.Customize(&req); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"genesis", "--store", "postgres://x", "--mesh", "/mesh/mesh.yaml", "--state", StateDir}
	if !slices.Equal(req.Cmd, want) {
		t.Errorf("cmd %q, want %q", req.Cmd, want)
	}
}
