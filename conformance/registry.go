// Package conformance knows the implementations of design 19 and what
// each claims: the registry the conformance bed checks them against, and
// the manifest check that refuses, at build time, a module using a
// capability its language's SDK does not claim (ADR 0074).
package conformance

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/meshbus/mesh/mesh/meshdesc"
)

// Capability is one part of design 19 an implementation may claim.
type Capability string

// The floor and the three capabilities, a closed set.
const (
	Connection   Capability = "connection"
	Events       Capability = "events"
	Tools        Capability = "tools"
	Provisioning Capability = "provisioning"
)

// Capabilities lists them in the order design 19 gives them.
var Capabilities = []Capability{Connection, Events, Tools, Provisioning}

// Implementation is one SDK and its driver.
type Implementation struct {
	// Name names it in the bed's scenarios, e.g. "go".
	Name string `yaml:"name"`
	// Language is the language modules using it are written in.
	Language string `yaml:"language"`
	// SDK is where the SDK lives in this repository.
	SDK string `yaml:"sdk"`
	// Driver is the driver's build recipe when it is written in Go: its
	// main package, built into a scratch image.
	Driver string `yaml:"driver"`
	// Node is the recipe of a driver written for Node.js: its program, a
	// path inside SDK ("mesh/sdk-js/driver/main.js"), run by Debian's
	// nodejs with the SDK's JavaScript beside it. Exactly one of Driver
	// and Node is set.
	Node string `yaml:"node"`
	// Claims are the capabilities it implements; the floor is always one.
	Claims []Capability `yaml:"claims"`
}

// ClaimsCapability reports whether the implementation claims c.
func (i Implementation) ClaimsCapability(c Capability) bool { return slices.Contains(i.Claims, c) }

// Registry is the list of implementations.
type Registry struct {
	Implementations []Implementation `yaml:"implementations"`
}

// ErrRegistry is wrapped by every refusal of a registry.
var ErrRegistry = errors.New("invalid conformance registry")

//go:embed registry.yaml
var registryYAML []byte

// Load reads the registry this repository ships.
func Load() (*Registry, error) { return Parse(registryYAML) }

// Parse reads and checks a registry: unique names and languages, known
// capabilities, the floor claimed by all, one build recipe each.
func Parse(data []byte) (*Registry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var r Registry
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRegistry, err)
	}
	names, langs := map[string]bool{}, map[string]bool{}
	for i, impl := range r.Implementations {
		where := fmt.Sprintf("implementations[%d] %q", i, impl.Name)
		if impl.Name == "" || impl.Language == "" {
			return nil, fmt.Errorf("%w: %s: name and language are required", ErrRegistry, where)
		}
		if names[impl.Name] {
			return nil, fmt.Errorf("%w: %s: duplicated name", ErrRegistry, where)
		}
		if langs[impl.Language] {
			return nil, fmt.Errorf("%w: %s: language %q has two implementations; a module's language must name one SDK", ErrRegistry, where, impl.Language)
		}
		names[impl.Name], langs[impl.Language] = true, true
		for _, c := range impl.Claims {
			if !slices.Contains(Capabilities, c) {
				return nil, fmt.Errorf("%w: %s: unknown capability %q (known: %v)", ErrRegistry, where, c, Capabilities)
			}
		}
		if !impl.ClaimsCapability(Connection) {
			return nil, fmt.Errorf("%w: %s: every implementation claims the floor (%s)", ErrRegistry, where, Connection)
		}
		if err := impl.checkRecipe(); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrRegistry, where, err)
		}
	}
	return &r, nil
}

// checkRecipe refuses a driver with no recipe or two, and a Node program
// that is not a script in a directory of the SDK's own: the image holds
// the SDK's package.json, its src and that directory (docs/conformance.md),
// not its tests.
func (i Implementation) checkRecipe() error {
	switch {
	case i.Driver != "" && i.Node != "":
		return errors.New("driver (a Go package) and node (a Node.js program) are both set; a driver is built one way")
	case i.Driver == "" && i.Node == "":
		return errors.New("no build recipe for its driver: set driver (a Go package) or node (a Node.js program of the SDK)")
	case i.Node == "":
		return nil
	case i.SDK == "" || !fs.ValidPath(i.SDK):
		return fmt.Errorf("node %q: the SDK's directory must be given as a relative path (sdk), got %q", i.Node, i.SDK)
	case !fs.ValidPath(i.Node) || path.Ext(i.Node) != ".js" || !strings.HasPrefix(path.Dir(i.Node), i.SDK+"/"):
		return fmt.Errorf("node %q: must be a .js file in a directory inside the SDK's (%s), as a relative path, e.g. %s/driver/main.js", i.Node, i.SDK, i.SDK)
	}
	return nil
}

// Implementation returns the one named.
func (r *Registry) Implementation(name string) (Implementation, bool) {
	i := slices.IndexFunc(r.Implementations, func(impl Implementation) bool { return impl.Name == name })
	if i < 0 {
		return Implementation{}, false
	}
	return r.Implementations[i], true
}

// ForLanguage returns the implementation modules in language are built on.
func (r *Registry) ForLanguage(language string) (Implementation, bool) {
	i := slices.IndexFunc(r.Implementations, func(impl Implementation) bool { return impl.Language == language })
	if i < 0 {
		return Implementation{}, false
	}
	return r.Implementations[i], true
}

// Claimants lists the implementations claiming c, by name.
func (r *Registry) Claimants(c Capability) []string {
	var out []string
	for _, impl := range r.Implementations {
		if impl.ClaimsCapability(c) {
			out = append(out, impl.Name)
		}
	}
	return out
}

// Uses lists the capabilities a module's manifest needs: the floor
// always; events when it emits or consumes; tools when it serves or uses
// a tool; provisioning when it provides something.
func Uses(mod meshdesc.Module) []Capability {
	out := []Capability{Connection}
	if len(mod.Emits) > 0 || len(mod.Consumes) > 0 {
		out = append(out, Events)
	}
	if len(mod.Tools) > 0 || len(mod.Uses) > 0 {
		out = append(out, Tools)
	}
	if len(mod.Provides) > 0 {
		out = append(out, Provisioning)
	}
	return out
}
