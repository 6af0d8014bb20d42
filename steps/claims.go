package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/conformance"
)

// claims are the steps about the registry and the build path, and what
// the build path's check answered.
type claims struct {
	s     *scenario
	build buildOutcome
}

// buildOutcome is what the build path's check answered.
type buildOutcome struct {
	module   string
	language string
	exit     int
	output   string
}

func (s *scenario) bindClaims(sc *godog.ScenarioContext) {
	c := &claims{s: s}
	sc.Step(`^the registry of implementations says:$`, c.theRegistrySays)
	sc.Step(`^the scenarios of this feature check every capability an implementation claims, and none it does not$`, c.theScenariosCheckExactlyTheClaims)
	sc.Step(`^the build path checks a module in "([^"]+)" that emits "([^"]+)"(?: and serves "([^"]+)")?$`, c.theBuildPathChecks)
	sc.Step(`^the build is refused, naming the module and the language without an SDK$`, c.theBuildIsRefused)
	sc.Step(`^the build is refused, naming the module, its language and the capability "([^"]+)" its SDK lacks$`, c.theBuildIsRefusedForLacking)
	sc.Step(`^the build is accepted$`, c.theBuildIsAccepted)
}

func (c *claims) theRegistrySays(t *godog.Table) error {
	reg, err := c.s.w.registry()
	if err != nil {
		return err
	}
	return joinProblems(reg.CheckTable(table(t)))
}

// theScenariosCheckExactlyTheClaims reads this bed's own scenarios: for
// each capability, the implementations its scenarios check (the values of
// the examples column the bed's matrix has a row for) must be exactly
// those claiming it.
func (c *claims) theScenariosCheckExactlyTheClaims(ctx context.Context) error {
	reg, err := c.s.w.registry()
	if err != nil {
		return err
	}
	bed, _, ok := beds.Current(ctx)
	if !ok {
		return errors.New("not running in a bed")
	}
	if bed.Matrix == nil {
		return fmt.Errorf("bed %s lists no matrix: nothing says which examples column names the implementation", bed.Name)
	}
	plan, err := beds.Scenarios(os.DirFS(c.s.w.opts.FeaturesDir), bed, "")
	if err != nil {
		return err
	}
	checked := make([]conformance.Checked, 0, len(plan))
	for _, sc := range plan {
		impl, _ := sc.Param(bed.Matrix.Param)
		checked = append(checked, conformance.Checked{Tags: sc.Tags, Implementation: impl})
	}
	return joinProblems(reg.CheckCoverage(checked))
}

func (c *claims) theBuildPathChecks(ctx context.Context, language, key, tool string) error {
	module := "built-" + language
	desc := fmt.Sprintf("name: build\nbus: {names: [nats], monitor: nats}\nnodes: [{name: node-a, modules: [%s]}]\nmodules:\n  - {name: %s, language: %s, emits: [%s]", module, module, language, key)
	if tool != "" {
		desc += ", tools: [" + tool + "]"
	}
	desc += "}\n"
	dir, err := os.MkdirTemp("", "mesh-build-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(file, []byte(desc), 0o644); err != nil {
		return err
	}
	// The build path's own command, run as the builder runs it.
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/mesh-build", "check", "--mesh", file)
	cmd.Dir = c.s.w.root()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		c.build = buildOutcome{module: module, language: language, exit: exit.ExitCode(), output: string(out)}
	case err != nil:
		return fmt.Errorf("run mesh-build check: %w\n%s", err, out)
	default:
		c.build = buildOutcome{module: module, language: language, output: string(out)}
	}
	return nil
}

func (c *claims) theBuildIsRefused() error {
	return c.refusedSaying(fmt.Sprintf("module %q", c.build.module), "no SDK for language")
}

// theBuildIsRefusedForLacking: the refusal names the module, its language,
// and the capability with the manifest's fields that need it
// ("tools (tools: 1)").
func (c *claims) theBuildIsRefusedForLacking(capability string) error {
	if err := c.refusedSaying(fmt.Sprintf("module %q in %s", c.build.module, c.build.language), "the manifest needs "); err != nil {
		return err
	}
	_, needs, _ := strings.Cut(c.build.output, "the manifest needs ")
	if !strings.Contains(needs, capability+" (") {
		return fmt.Errorf("expected the refusal to name %s among what the manifest needs, it says:\n%s", capability, c.build.output)
	}
	return nil
}

func (c *claims) refusedSaying(says ...string) error {
	if c.build.exit != 1 {
		return fmt.Errorf("expected the build refused (exit 1), got exit %d:\n%s", c.build.exit, c.build.output)
	}
	for _, want := range says {
		if !strings.Contains(c.build.output, want) {
			return fmt.Errorf("expected the refusal to say %q, it says:\n%s", want, c.build.output)
		}
	}
	return nil
}

func (c *claims) theBuildIsAccepted() error {
	if c.build.exit != 0 {
		return fmt.Errorf("expected the build accepted, got exit %d:\n%s", c.build.exit, c.build.output)
	}
	return nil
}
