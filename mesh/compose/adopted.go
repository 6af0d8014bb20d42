package compose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/conf"
)

// ErrNotAdoptable refuses a server's configuration the mesh cannot be
// composed into without changing what the server was raised with.
var ErrNotAdoptable = errors.New("configuration cannot be adopted")

// Raised is the configuration a server adopted in place was raised with
// (rollout.Adopt; design 25 §9 step 2), read with nats-server's own
// parser.
type Raised struct {
	settings map[string]any
}

// ReadRaised reads a server's configuration as it was raised and checks
// that the mesh can be composed into it, keeping every setting: TLS on
// its client port (every principal of the mesh dials TLS and pins the
// certificate), JetStream on (the mesh's accounts hold streams), no
// operator or resolver (the mesh's accounts are configuration, not signed
// tokens: design 25 §4), no include (the controller writes one file and
// keeps it whole).
func ReadRaised(data []byte) (Raised, error) {
	if bytes.Contains(data, []byte("include ")) || bytes.Contains(data, []byte("include\t")) {
		return Raised{}, fmt.Errorf("%w: it includes other files; give the server its configuration in one file", ErrNotAdoptable)
	}
	m, err := conf.Parse(string(data))
	if err != nil {
		return Raised{}, fmt.Errorf("%w: nats-server cannot read it: %w", ErrNotAdoptable, err)
	}
	var bad []string
	if _, ok := m["tls"].(map[string]any); !ok {
		bad = append(bad, "its client port has no tls block: every principal of the mesh dials TLS")
	}
	switch js := m["jetstream"].(type) {
	case map[string]any:
	case bool:
		if !js {
			bad = append(bad, "jetstream is off: the mesh's accounts hold streams")
		}
	case string:
		if js != "enabled" && js != "enable" {
			bad = append(bad, fmt.Sprintf("jetstream is %q: the mesh's accounts hold streams", js))
		}
	default:
		bad = append(bad, "it has no jetstream: the mesh's accounts hold streams")
	}
	for _, k := range []string{"operator", "operators", "resolver", "trusted", "trusted_keys"} {
		if _, ok := m[k]; ok {
			bad = append(bad, fmt.Sprintf("it sets %s: the mesh's accounts are configuration, not signed tokens", k))
		}
	}
	if len(bad) > 0 {
		return Raised{}, fmt.Errorf("%w: %s", ErrNotAdoptable, strings.Join(bad, "; "))
	}
	return Raised{settings: m}, nil
}

// ServerName is the server_name it was raised with, "" for none.
func (r Raised) ServerName() string {
	s, _ := r.settings["server_name"].(string)
	return s
}

// Adopted is the configuration the controller writes for the server
// adopted in place: every setting it was raised with, as it was (its
// name, listeners, TLS, JetStream's store, its own users and accounts),
// and beside its own accounts those of the mesh, from composed (Config).
// The raised settings win where both name one: a reload that changed a
// listener, the name or the store would be refused whole (NATS-NOTES
// "Reload"), and the server's data lives where it was raised to keep it.
// An account or a user of the mesh whose name it already has is refused:
// the server would refuse the reload, or worse, merge them.
func Adopted(raised Raised, composed []byte) ([]byte, error) { return adopted(raised, composed, false) }

// AdoptedBare is Adopted with the mesh's accounts bare: named, with
// nothing in them. The server routes no service import of an account
// that a reload introduces with its imports (TestAnAccountIntroducedBy
// AReloadRoutesNoImport), so an adoption introduces the mesh's accounts
// bare in one reload and gives them their exports, imports and users in
// the next.
func AdoptedBare(raised Raised, composed []byte) ([]byte, error) {
	return adopted(raised, composed, true)
}

func adopted(raised Raised, composed []byte, bare bool) ([]byte, error) {
	var mesh struct {
		Accounts map[string]map[string]any `json:"accounts"`
	}
	if err := json.Unmarshal(composed, &mesh); err != nil {
		return nil, fmt.Errorf("adopted configuration: read the composition: %w", err)
	}
	out := maps.Clone(raised.settings)
	accounts := map[string]any{}
	if have, ok := out["accounts"].(map[string]any); ok {
		maps.Copy(accounts, have)
	}
	theirs := raisedUsers(raised.settings)
	var clash []string
	for _, name := range slices.Sorted(maps.Keys(mesh.Accounts)) {
		if _, ok := accounts[name]; ok {
			clash = append(clash, fmt.Sprintf("account %s", name))
			continue
		}
		accounts[name] = mesh.Accounts[name]
		if bare {
			accounts[name] = map[string]any{}
		}
		users, _ := mesh.Accounts[name]["users"].([]any)
		for _, u := range users {
			if um, ok := u.(map[string]any); ok {
				if n, _ := um["user"].(string); theirs[n] {
					clash = append(clash, fmt.Sprintf("user %s", n))
				}
			}
		}
	}
	if len(clash) > 0 {
		return nil, fmt.Errorf("%w: it already has %s, which the mesh composes", ErrNotAdoptable, strings.Join(clash, ", "))
	}
	out["accounts"] = accounts
	// One whole JSON document, as every composition: the nats image's
	// entrypoint applies nothing else (a torn write is refused whole).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("adopted configuration: %w", err)
	}
	return buf.Bytes(), nil
}

// raisedUsers are the user names the raised configuration has, in its
// authorization block and in its accounts.
func raisedUsers(settings map[string]any) map[string]bool {
	out := map[string]bool{}
	add := func(v any) {
		list, _ := v.([]any)
		for _, u := range list {
			if um, ok := u.(map[string]any); ok {
				if n, ok := um["user"].(string); ok {
					out[n] = true
				}
			}
		}
	}
	if auth, ok := settings["authorization"].(map[string]any); ok {
		add(auth["users"])
		if u, ok := auth["user"].(string); ok {
			out[u] = true
		}
	}
	if accs, ok := settings["accounts"].(map[string]any); ok {
		for _, a := range accs {
			if am, ok := a.(map[string]any); ok {
				add(am["users"])
			}
		}
	}
	return out
}
