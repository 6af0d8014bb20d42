package provision

import (
	"fmt"
	"os"

	"github.com/meshbus/mesh/mesh/wire"
)

// ReadGrants reads the contributions file at path to its grants, one per
// consumer (module = as, node = node). A missing file is an error, not an
// empty reading: the loop must not take "nothing asked" from a file that
// is not there yet.
func ReadGrants(path string) ([]Grant, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read contributions: %w", err)
	}
	gs, err := ParseGrants(data)
	if err != nil {
		return nil, fmt.Errorf("read contributions %s: %w", path, err)
	}
	return gs, nil
}

// ParseGrants reads the text of a contributions file to its grants. A
// refusal wraps wire.ErrBadContributions and names the entry and field.
func ParseGrants(data []byte) ([]Grant, error) {
	cs, err := wire.ParseContributions(data)
	if err != nil {
		return nil, err
	}
	gs := make([]Grant, len(cs))
	for i, c := range cs {
		gs[i] = Grant{Consumer: Consumer{Module: c.As, Node: c.Node}, Secret: c.Secret, At: c.At, Values: c.Values}
	}
	return gs, nil
}
