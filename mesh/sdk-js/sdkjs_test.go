package sdkjs

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestNodeSuites runs the JavaScript suites with the machine's Node
// (node --test): the client's unit suites drive it with bytes alone, no
// socket and no port. Without a Node of 20 or later it is skipped, saying
// so; CI installs one.
func TestNodeSuites(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("the JavaScript SDK's suites are not run: no node on PATH (Debian: apt-get install nodejs)")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("node --version printed %q", out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 20 {
		t.Skipf("the JavaScript SDK's suites are not run: node %s is older than 20", out)
	}
	// go test caches a passing result by the files the test opens; node
	// reads the suites in a process of its own, so they are opened here,
	// or a changed suite would pass from the cache.
	for _, dir := range []string{"src", "test"} {
		if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.ReadFile(path)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "test/")
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, res)
	}
	if s := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindSubmatch(res); s != nil {
		t.Logf("node --test: %s tests passed", s[1])
	} else {
		t.Fatalf("node --test printed no count of passed tests:\n%s", res)
	}
}
