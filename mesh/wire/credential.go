package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
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
	// Tools are, in a person's credential, the tools the person may call,
	// each "<module>.<tool>", or "*" alone for every tool the catalogue
	// lists (an administrator): what its client offers. The server's
	// grant is what is enforced; this only spares a client offering what
	// the server would refuse.
	Tools []string `json:"tools,omitempty"`
	// Bootstrap is true when the credential was a plain URL: unscoped, for
	// the moment before a mesh can issue anything. It is never ordinary.
	Bootstrap bool `json:"-"`
}

// ErrBadCredential is wrapped by every refusal of a credential. No refusal
// ever carries the URL's password: a module logs what it could not read.
var ErrBadCredential = errors.New("invalid credential")

var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseCredential reads a credential: a JSON document, or a plain string
// that is a bootstrap URL. A scoped credential missing a required field is
// refused with the field's name, never guessed at; so is one followed by
// anything but white space, and one whose URL's user is not the user its
// principal's identity derives (Validate).
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
	// text is trimmed, so anything after the document is not white space:
	// a second document, or the tail of a file written over a longer one.
	if off := dec.InputOffset(); off != int64(len(text)) {
		return Credential{}, fmt.Errorf("%w: trailing data after the JSON document at byte %d", ErrBadCredential, off)
	}
	return c, c.Validate()
}

// Validate checks a scoped credential whole: every field (ValidateFields),
// and that the URL's user is the user its principal's identity derives
// (users.go), so that a credential cannot say it is one principal and log
// in as another.
func (c Credential) Validate() error {
	if err := c.ValidateFields(); err != nil {
		return err
	}
	if c.Bootstrap {
		return nil
	}
	k, _ := c.kind() // known: ValidateFields checked it
	if user := c.User(); !k.user.allows(user) {
		return fmt.Errorf("%w: field url: user %q is not %s (want %s)", ErrBadCredential, user, k.who, k.user)
	}
	return nil
}

// ValidateFields checks a scoped credential field by field, each on its
// own: the URL (a user and a password, a host, a port in range, amqps
// rather than amqp), the fingerprint, and the identity fields the
// principal's kind needs. It does not compare the URL's user with the
// identity: a dialler leaves that to the server, which refuses a user it
// does not know (the genesis bed dials a stranger's user on purpose to
// see it).
func (c Credential) ValidateFields() error {
	if c.URL == "" {
		return fmt.Errorf("%w: field url is missing", ErrBadCredential)
	}
	u, err := parseBusURL(c.URL)
	if err != nil {
		return fmt.Errorf("%w: field url: %v", ErrBadCredential, err)
	}
	if c.Bootstrap {
		return nil
	}
	if u.Scheme == "amqp" {
		// Plain TCP has no certificate to check the pin against: accepting
		// it would be the silent downgrade design 19 forbids.
		return fmt.Errorf("%w: field url: %s: scheme amqp is plain TCP and a scoped credential pins a certificate; want amqps", ErrBadCredential, RedactURL(c.URL))
	}
	if u.User == nil || u.User.Username() == "" {
		return fmt.Errorf("%w: field url: %s: no user (want %s)", ErrBadCredential, RedactURL(c.URL), urlForm)
	}
	if pw, ok := u.User.Password(); !ok || pw == "" {
		return fmt.Errorf("%w: field url: %s: no password (want %s)", ErrBadCredential, RedactURL(c.URL), urlForm)
	}
	if c.Fingerprint == "" {
		return fmt.Errorf("%w: field fingerprint is missing", ErrBadCredential)
	}
	if !fingerprintRE.MatchString(c.Fingerprint) {
		return fmt.Errorf("%w: field fingerprint: want 64 lower-case hex digits, got %q", ErrBadCredential, c.Fingerprint)
	}
	k, ok := c.kind()
	if !ok {
		return fmt.Errorf("%w: field principal: unknown kind %q", ErrBadCredential, c.Principal)
	}
	if len(c.Tools) > 0 && c.Principal != PrincipalPerson {
		return fmt.Errorf("%w: field tools: only a person's credential lists tools", ErrBadCredential)
	}
	for _, f := range k.need {
		if f.value == "" {
			return fmt.Errorf("%w: field %s is missing", ErrBadCredential, f.name)
		}
		if err := CheckName(f.value); err != nil {
			return fmt.Errorf("%w: field %s: %v", ErrBadCredential, f.name, err)
		}
	}
	if k.check != nil {
		return k.check(c)
	}
	return nil
}

// principalKind is what a credential's principal kind asks of it.
type principalKind struct {
	// need are the identity fields the kind must carry, in the order a
	// missing one is reported.
	need []field
	// user is the rule the URL's user must follow.
	user userRule
	// who names the principal in a refusal.
	who string
	// check, when set, checks what else the kind carries (a field only it
	// has), after the identity fields.
	check func(Credential) error
}

type field struct{ name, value string }

// kind is the principal kind of c: adding a kind of principal is adding a
// case here (and its user in users.go). It reports false for a kind it
// does not know.
func (c Credential) kind() (principalKind, bool) {
	switch c.Principal {
	case PrincipalModule:
		return principalKind{
			need: []field{{"node", c.Node}, {"module", c.Module}},
			user: exactUser(ModuleUser(c.Node, c.Module)),
			who:  fmt.Sprintf("module %q on node %q", c.Module, c.Node),
		}, true
	case PrincipalHost:
		return principalKind{
			need: []field{{"node", c.Node}},
			user: exactUser(HostUser(c.Node)),
			who:  fmt.Sprintf("the host of node %q", c.Node),
			check: func(c Credential) error {
				if c.DeclarationKey == "" {
					return fmt.Errorf("%w: field declaration_key is missing", ErrBadCredential)
				}
				_, err := DecodeDeclarationKey(c.DeclarationKey)
				return err
			},
		}, true
	case PrincipalPerson:
		return principalKind{need: []field{{"name", c.Name}}, user: exactUser(PersonUser(c.Name)), who: fmt.Sprintf("person %q", c.Name), check: checkPersonTools}, true
	case PrincipalEnrol:
		return principalKind{need: []field{{"name", c.Name}}, user: exactUser(EnrolUser(c.Name)), who: fmt.Sprintf("enrolment token %q", c.Name)}, true
	case PrincipalBuilder:
		return principalKind{user: exactUser(BuilderUser), who: "the builder"}, true
	case PrincipalSource:
		return principalKind{need: []field{{"name", c.Name}}, user: exactUser(SourceUser(c.Name)), who: fmt.Sprintf("source repository %q", c.Name)}, true
	case PrincipalController:
		// The controller may hold more than one user (one per account it
		// works in); every one of them begins with ControllerUser.
		return principalKind{user: userRule{want: ControllerUser, prefix: true}, who: "the controller"}, true
	}
	return principalKind{}, false
}

// userRule is the user a principal's credential may carry: exactly want,
// or any user beginning with it.
type userRule struct {
	want   string
	prefix bool
}

func exactUser(u string) userRule { return userRule{want: u} }

func (r userRule) allows(user string) bool {
	if r.prefix {
		return strings.HasPrefix(user, r.want)
	}
	return user == r.want
}

func (r userRule) String() string {
	if r.prefix {
		return fmt.Sprintf("a user beginning with %q", r.want)
	}
	return fmt.Sprintf("%q", r.want)
}

// Account is the account the credential's user is in
// (docs/decisions/0001-accounts.md).
func (c Credential) Account() string {
	switch c.Principal {
	case PrincipalHost:
		return AccountHosts
	case PrincipalSource:
		return AccountSources
	case PrincipalBuilder:
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

// Scheme is the credential URL's scheme (tls, nats, amqps, amqp), which
// says which bus it is for; "" when the URL does not parse.
func (c Credential) Scheme() string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return ""
	}
	return u.Scheme
}

// Password is the password the credential's URL carries. It is a secret:
// never log it, never put it in an error.
func (c Credential) Password() string {
	u, err := url.Parse(c.URL)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
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

// HostPort is the host and port the bus is dialled at, as the URL writes
// them (the port may be absent).
func (c Credential) HostPort() string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return ""
	}
	return u.Host
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

// urlForm is the form a scoped credential's URL takes.
const urlForm = "tls://user:password@host:port"

// redacted stands in for a password wherever a URL is shown.
const redacted = "xxxxx"

// RedactURL is s fit for a log line or an error: the password, if s
// carries one, replaced by xxxxx. It never fails, whatever s is, since the
// URLs it is asked to show are the ones that could not be read.
func RedactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		// Without a scheme, url.Parse would read a "user:password@" as a
		// scheme and an opaque part: nothing tells the secret apart, so
		// nothing of s is shown.
		return "(a URL without scheme://, not shown)"
	}
	userinfo, hostAndTail, hasUser := splitUserinfo(rest)
	if !hasUser {
		return s
	}
	user, _, hasPassword := strings.Cut(userinfo, ":")
	if hasPassword {
		user += ":" + redacted
	}
	return scheme + "://" + user + "@" + hostAndTail
}

// splitUserinfo cuts "userinfo@host…" where url.Parse does: the authority
// ends at the first '/', '?' or '#', and the userinfo at its last '@'.
func splitUserinfo(rest string) (userinfo, hostAndTail string, ok bool) {
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return "", rest, false
	}
	return rest[:at], rest[at+1:], true
}

// parseBusURL reads a credential's URL. Its errors never carry the
// password: url.Parse's echo the whole URL, so the host, port and tail
// are checked apart from the userinfo, and the userinfo with a fixed
// message.
func parseBusURL(s string) (*url.URL, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, fmt.Errorf("want %s (no scheme:// found)", urlForm)
	}
	userinfo, hostAndTail, hasUser := splitUserinfo(rest)
	shown := RedactURL(s)
	bare, err := url.Parse(scheme + "://" + hostAndTail)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", shown, urlReason(err))
	}
	switch bare.Scheme {
	case "tls", "nats", "amqp", "amqps":
	default:
		return nil, fmt.Errorf("%s: scheme %q is not one of tls, nats, amqp, amqps", shown, bare.Scheme)
	}
	if bare.Hostname() == "" {
		return nil, fmt.Errorf("%s: no host", shown)
	}
	if strings.HasSuffix(bare.Host, ":") {
		return nil, fmt.Errorf("%s: empty port", shown)
	}
	if p := bare.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s: port %s out of range", shown, p)
		}
	}
	if hasUser {
		if _, err := url.Parse("tls://" + userinfo + "@h"); err != nil {
			return nil, fmt.Errorf("%s: the user and password are not valid in a URL (reserved characters must be percent-encoded)", shown)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		// Both halves parse, so this is not expected; say nothing of s
		// but its redacted form.
		return nil, fmt.Errorf("%s: not a valid URL", shown)
	}
	return u, nil
}

// urlReason is what url.Parse found wrong, without the URL it echoes.
func urlReason(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
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
	case PrincipalBuilder:
		return BuilderInbox
	case PrincipalSource:
		return SourceInbox(c.Name)
	}
	return ""
}

// checkPersonTools checks a person's tools: "*" alone, or each
// "<module>.<tool>" once.
func checkPersonTools(c Credential) error {
	if slices.Contains(c.Tools, "*") {
		if len(c.Tools) != 1 {
			return fmt.Errorf("%w: field tools: \"*\" stands alone", ErrBadCredential)
		}
		return nil
	}
	for i, t := range c.Tools {
		module, tool, ok := strings.Cut(t, ".")
		if !ok || CheckName(module) != nil || CheckToolName(tool) != nil {
			return fmt.Errorf("%w: field tools[%d]: %q is not <module>.<tool>", ErrBadCredential, i, t)
		}
		if slices.Contains(c.Tools[:i], t) {
			return fmt.Errorf("%w: field tools[%d]: %q twice", ErrBadCredential, i, t)
		}
	}
	return nil
}

// MayCall reports whether a person's credential lists the tool (Tools):
// what a client offers the person.
func (c Credential) MayCall(module, tool string) bool {
	return slices.Contains(c.Tools, "*") || slices.Contains(c.Tools, module+"."+tool)
}

// ReadCredentialFile reads and checks the credential document at path,
// the path named in every error.
func ReadCredentialFile(path string) (Credential, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Credential{}, fmt.Errorf("credential: %w", err)
	}
	cred, err := ParseCredential(data)
	if err != nil {
		return Credential{}, fmt.Errorf("credential %s: %w", path, err)
	}
	return cred, nil
}
