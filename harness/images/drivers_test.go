package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshbus/mesh/conformance"
)

// TestEveryRegisteredDriverHasAnImage keeps the images in step with the
// conformance registry, so that `make images` (and CI) builds every
// driver a bed will run: a Go driver is in All(), a Node.js one's image
// can be made from the checkout.
func TestEveryRegisteredDriverHasAnImage(t *testing.T) {
	reg, err := conformance.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, impl := range reg.Implementations {
		if impl.Node != "" {
			if _, err := NodeDriver(Debian{}, "../..", impl.Name, impl.SDK, impl.Node); err != nil {
				t.Errorf("implementation %s: %v", impl.Name, err)
			}
			continue
		}
		want := Driver(impl.Name, impl.Driver)
		if !slices.ContainsFunc(All(), func(s Spec) bool {
			return s.Name == want.Name && slices.Equal(s.Binaries, want.Binaries)
		}) {
			t.Errorf("implementation %s: its driver image %s (%s) is not in All()", impl.Name, want.Name, impl.Driver)
		}
	}
}

// sdkTree writes a JavaScript SDK of files (path → content) under a
// temporary checkout and returns the checkout's root.
func sdkTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

var jsSDK = map[string]string{
	"sdk/js/package.json":          `{"type":"module"}`,
	"sdk/js/src/index.js":          "export const a = 1;\n",
	"sdk/js/src/nats/client.js":    "export const b = 2;\n",
	"sdk/js/src/README.md":         "not a script\n",
	"sdk/js/driver/main.js":        "import '../src/index.js';\n",
	"sdk/js/driver/usage.js":       "export const usage = '';\n",
	"sdk/js/test/client.test.js":   "a test, not the SDK\n",
	"sdk/js/bench/publish.js":      "a benchmark, not the SDK\n",
	"sdk/js/node_modules/x/y.js":   "nothing of ours\n",
	"elsewhere/src/stranger.js":    "another directory\n",
	"sdk/js/driver/fixtures/f.txt": "not a script\n",
}

func TestNodeDriverHoldsTheSDKsScriptsAndRunsTheProgramOnDebiansNode(t *testing.T) {
	root := sdkTree(t, jsSDK)
	s, err := NodeDriver(Debian{}, root, "js", "sdk/js", "sdk/js/driver/main.js")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	var paths []string
	for _, f := range s.Files {
		paths = append(paths, f.Path)
		if rel := "sdk/js" + strings.TrimPrefix(f.Path, "/opt/sdk-js"); f.Body != jsSDK[rel] {
			t.Errorf("%s: expected the content of %s, got %q", f.Path, rel, f.Body)
		}
	}
	slices.Sort(paths)
	want := []string{
		"/opt/sdk-js/driver/main.js", "/opt/sdk-js/driver/usage.js", "/opt/sdk-js/package.json",
		"/opt/sdk-js/src/index.js", "/opt/sdk-js/src/nats/client.js",
	}
	if !slices.Equal(paths, want) {
		t.Errorf("expected the files %q, got %q", want, paths)
	}
	if s.Name != "mesh-driver-js" || !slices.Equal(s.Packages, []string{"nodejs"}) ||
		!slices.Equal(s.Entrypoint, []string{"/usr/bin/node", "/opt/sdk-js/driver/main.js"}) || !slices.Contains(s.Remove, "/usr/share/doc") {
		t.Errorf("expected mesh-driver-js of Debian's nodejs running the program, got %+v", s)
	}
}

// A changed script is a changed image; so is a script added.
func TestNodeDriverInputsAreItsScripts(t *testing.T) {
	root := sdkTree(t, jsSDK)
	digest := func() string {
		t.Helper()
		s, err := NodeDriver(Debian{}, root, "js", "sdk/js", "sdk/js/driver/main.js")
		if err != nil {
			t.Fatal(err)
		}
		d, err := debianDigest(s, "amd64", "")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := digest()
	if digest() != before {
		t.Fatal("expected the same checkout to give the same digest")
	}
	for _, c := range []struct{ rel, body string }{
		{"sdk/js/test/client.test.js", "a test changed\n"},
		{"sdk/js/src/README.md", "docs changed\n"},
	} {
		if err := os.WriteFile(filepath.Join(root, c.rel), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if digest() != before {
			t.Errorf("%s: expected a file outside the image to leave its digest alone", c.rel)
		}
	}
	for _, rel := range []string{"sdk/js/src/nats/client.js", "sdk/js/driver/main.js", "sdk/js/package.json", "sdk/js/src/nats/new.js"} {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(rel)), []byte("changed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		after := digest()
		if after == before {
			t.Errorf("%s: expected a changed script to change the image's digest", rel)
		}
		before = after
	}
}

func TestNodeDriverRefusesWhatItCannotRun(t *testing.T) {
	root := sdkTree(t, jsSDK)
	for _, c := range []struct{ sdk, program, want string }{
		{"sdk/js", "sdk/js/driver/absent.js", "its program is not in the checkout"},
		{"sdk/js", "elsewhere/src/stranger.js", "not in a directory inside the SDK's"},
		{"sdk/none", "sdk/none/driver/main.js", "its program is not in the checkout"},
	} {
		if _, err := NodeDriver(Debian{}, root, "js", c.sdk, c.program); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s in %s: expected an error saying %q, got %v", c.program, c.sdk, c.want, err)
		}
	}
	if err := os.Remove(filepath.Join(root, "sdk/js/package.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := NodeDriver(Debian{}, root, "js", "sdk/js", "sdk/js/driver/main.js"); err == nil || !strings.Contains(err.Error(), "package.json") {
		t.Errorf("without package.json: expected an error naming it, got %v", err)
	}
}
