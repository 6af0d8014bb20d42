package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Principal kinds a credential document may be issued to. A document
// without a principal is a module's (design 19's credential); the other
// kinds are the mesh's own principals and carry the same four fields.
const (
	PrincipalModule     = ""
	PrincipalController = "controller"
	PrincipalHost       = "host"
	PrincipalPerson     = "person"
	PrincipalEnrol      = "enrol"
)

// Credential is the credential document of design 19: where the bus is,
// which certificate it must present, and whose account this is.
type Credential struct {
	// URL is tls://user:password@host:port.
	URL string `json:"url"`
	// Fingerprint is the lower-case hex sha256 of the DER certificate the
	// bus must present.
	Fingerprint string `json:"fingerprint"`
	// Node is the machine the account was issued for.
	Node string `json:"node,omitempty"`
	// Module is the module the account was issued for.
	Module string `json:"module,omitempty"`
	// Principal is empty for a module, else one of the Principal* kinds.
	Principal string `json:"principal,omitempty"`
	// Name names a person or a token for those principals.
	Name string `json:"name,omitempty"`
	// DeclarationKey is, in a host's credential, the controller's public
	// key (EncodeDeclarationKey): a host takes from NODES only what it
	// signed (VerifyDeclaration).
	DeclarationKey string `json:"declaration_key,omitempty"`
	// Bootstrap is true when the credential was a plain URL: unscoped, for
	// the moment before a mesh can issue anything. It is never ordinary.
	Bootstrap bool `json:"-"`
}

// ErrBadCredential is wrapped by every refusal of a credential.
var ErrBadCredential = errors.New("invalid credential")

var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseCredential reads a credential: a JSON document, or a plain string
// that is a bootstrap URL. A scoped credential missing a required field is
// refused with the field's name, never guessed at.
func ParseCredential(data []byte) (Credential, error) {
	text := strings.TrimSpace(string(data))
	if text == "" {
		return Credential{}, fmt.Errorf("%w: empty", ErrBadCredential)
	}
	if !strings.HasPrefix(text, "{") {
		if strings.HasPrefix(text, `"`) {
			if err := json.Unmarshal([]byte(text), &text); err != nil {
				return Credential{}, fmt.Errorf("%w: bootstrap url: %v", ErrBadCredential, err)
			}
		}
		if _, err := parseBusURL(text); err != nil {
			return Credential{}, fmt.Errorf("%w: bootstrap url: %v", ErrBadCredential, err)
		}
		return Credential{URL: text, Bootstrap: true}, nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var c Credential
	if err := dec.Decode(&c); err != nil {
		return Credential{}, fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	return c, c.Validate()
}

// Validate checks a scoped credential field by field.
func (c Credential) Validate() error {
	if c.URL == "" {
		return fmt.Errorf("%w: field url is missing", ErrBadCredential)
	}
	if _, err := parseBusURL(c.URL); err != nil {
		return fmt.Errorf("%w: field url: %v", ErrBadCredential, err)
	}
	if c.Bootstrap {
		return nil
	}
	if c.Fingerprint == "" {
		return fmt.Errorf("%w: field fingerprint is missing", ErrBadCredential)
	}
	if !fingerprintRE.MatchString(c.Fingerprint) {
		return fmt.Errorf("%w: field fingerprint: want 64 lower-case hex digits, got %q", ErrBadCredential, c.Fingerprint)
	}
	need := func(field, v string) error {
		if v == "" {
			return fmt.Errorf("%w: field %s is missing", ErrBadCredential, field)
		}
		if err := CheckName(v); err != nil {
			return fmt.Errorf("%w: field %s: %v", ErrBadCredential, field, err)
		}
		return nil
	}
	switch c.Principal {
	case PrincipalModule:
		if err := need("node", c.Node); err != nil {
			return err
		}
		return need("module", c.Module)
	case PrincipalHost:
		if err := need("node", c.Node); err != nil {
			return err
		}
		if c.DeclarationKey == "" {
			return fmt.Errorf("%w: field declaration_key is missing", ErrBadCredential)
		}
		_, err := DecodeDeclarationKey(c.DeclarationKey)
		return err
	case PrincipalPerson, PrincipalEnrol:
		return need("name", c.Name)
	case PrincipalController:
		return nil
	default:
		return fmt.Errorf("%w: field principal: unknown kind %q", ErrBadCredential, c.Principal)
	}
}

// Account is the account the credential's user is in
// (docs/decisions/0001-accounts.md).
func (c Credential) Account() string {
	switch c.Principal {
	case PrincipalHost:
		return AccountControl
	case PrincipalEnrol:
		return AccountEnrol
	case PrincipalController:
		if c.User() == ControllerUser {
			return AccountControl
		}
	}
	return AccountMesh
}

// User is the user name the credential's URL carries.
func (c Credential) User() string {
	u, err := url.Parse(c.URL)
	if err != nil || u.User == nil {
		return ""
	}
	return u.User.Username()
}

// Host is the host name the bus is dialled by, the name its certificate
// must carry.
func (c Credential) Host() string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Marshal renders the document as indented JSON with a final newline.
func (c Credential) Marshal() []byte {
	b, _ := json.MarshalIndent(c, "", "  ")
	return append(b, '\n')
}

// BusURL composes the URL a credential carries.
func BusURL(user, password, hostport string) string {
	u := url.URL{Scheme: "tls", User: url.UserPassword(user, password), Host: hostport}
	return u.String()
}

func parseBusURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "tls", "nats", "amqp", "amqps":
	default:
		return nil, fmt.Errorf("scheme %q is not one of tls, nats, amqp, amqps", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("no host")
	}
	return u, nil
}

// Inbox is the inbox prefix of the principal the credential was issued
// to: the one prefix its user may subscribe for replies.
func (c Credential) Inbox() string {
	switch c.Principal {
	case PrincipalModule:
		return ModuleInbox(c.Node, c.Module)
	case PrincipalHost:
		return HostInbox(c.Node)
	case PrincipalPerson:
		return PersonInbox(c.Name)
	case PrincipalEnrol:
		return EnrolInbox(c.Name)
	case PrincipalController:
		return ControllerInbox
	}
	return ""
}
