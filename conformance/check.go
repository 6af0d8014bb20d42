package conformance

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/meshbus/mesh/mesh/meshdesc"
)

// ErrUnsupported is wrapped when a module uses a capability its
// language's SDK does not claim, or is written in a language with none.
var ErrUnsupported = errors.New("capability not implemented by the module's SDK")

// CheckModule is the manifest check of the build path: it refuses a
// module whose manifest needs a capability the SDK of its language does
// not claim, saying which and why.
func (r *Registry) CheckModule(mod meshdesc.Module) error {
	lang := mod.LanguageOrDefault()
	impl, ok := r.ForLanguage(lang)
	if !ok {
		return fmt.Errorf("module %q: %w: no SDK for language %q (the registry has %s)", mod.Name, ErrUnsupported, lang, r.languages())
	}
	var missing []string
	for _, c := range Uses(mod) {
		if !impl.ClaimsCapability(c) {
			missing = append(missing, fmt.Sprintf("%s (%s)", c, why(mod, c)))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("module %q in %s: %w: the %s SDK claims %v, the manifest needs %s",
			mod.Name, lang, ErrUnsupported, impl.Name, impl.Claims, strings.Join(missing, ", "))
	}
	return nil
}

// CheckMesh checks every module of a description and reports every
// refusal.
func (r *Registry) CheckMesh(m *meshdesc.Mesh) error {
	var errs *multierror.Error
	for _, mod := range m.Modules {
		errs = multierror.Append(errs, r.CheckModule(mod))
	}
	return errs.ErrorOrNil()
}

// why names the manifest fields that make a module need c.
func why(mod meshdesc.Module, c Capability) string {
	var fields []string
	add := func(name string, n int) {
		if n > 0 {
			fields = append(fields, fmt.Sprintf("%s: %d", name, n))
		}
	}
	switch c {
	case Events:
		add("emits", len(mod.Emits))
		add("consumes", len(mod.Consumes))
	case Tools:
		add("tools", len(mod.Tools))
		add("uses", len(mod.Uses))
	case Provisioning:
		add("provides", len(mod.Provides))
	}
	return strings.Join(fields, ", ")
}

func (r *Registry) languages() string {
	var out []string
	for _, impl := range r.Implementations {
		out = append(out, impl.Language)
	}
	return strings.Join(out, ", ")
}
