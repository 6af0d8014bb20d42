package rabbitmq

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// hashingAlgorithm is RabbitMQ's default password hashing, the one whose
// hashes definitions carry.
const hashingAlgorithm = "rabbit_password_hashing_sha256"

type user struct {
	name, password string
	tags           []string
}

type permission struct {
	User      string `json:"user"`
	Vhost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// settings is what the Options say.
type settings struct {
	admin  user
	users  []user
	vhosts []string
	perms  []permission
	config []string
}

func defaultSettings() settings {
	return settings{admin: user{name: DefaultAdminUsername, password: rand.Text(), tags: []string{"administrator"}}}
}

// passwords maps every user, the administrator too, to its password.
func (s settings) passwords() map[string]string {
	m := map[string]string{s.admin.name: s.admin.password}
	for _, u := range s.users {
		m[u.name] = u.password
	}
	return m
}

// check refuses settings RabbitMQ would refuse or misread, naming the
// culprit, before a container is made.
func (s settings) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
	}
	// The administrator is also the default user of rabbitmq.conf, whose
	// values end at a blank or a comment.
	if s.admin.name == "" || s.admin.password == "" || strings.ContainsAny(s.admin.name+s.admin.password, " \t\r\n#\"'\\") {
		return bad("administrator %q: name and password must be non-empty, without blanks, quotes or #", s.admin.name)
	}
	users := []string{s.admin.name}
	for _, u := range s.users {
		if u.name == "" || u.password == "" || strings.ContainsAny(u.name+u.password, "\r\n") {
			return bad("user %q: name and password must be non-empty lines", u.name)
		}
		if slices.Contains(users, u.name) {
			return bad("user %q given twice", u.name)
		}
		users = append(users, u.name)
	}
	vhosts := []string{"/"}
	for _, v := range s.vhosts {
		if v == "" || strings.ContainsAny(v, "\r\n") {
			return bad("virtual host %q", v)
		}
		if slices.Contains(vhosts, v) {
			return bad("virtual host %q given twice", v)
		}
		vhosts = append(vhosts, v)
	}
	for _, p := range s.perms {
		if !slices.Contains(users, p.User) {
			return bad("permission of user %q, who is not given", p.User)
		}
		if !slices.Contains(vhosts, p.Vhost) {
			return bad("permission of user %q on virtual host %q, which is not given", p.User, p.Vhost)
		}
	}
	for _, l := range s.config {
		if strings.ContainsAny(l, "\r\n") {
			return bad("config line %q spans lines", l)
		}
	}
	return nil
}

// render is the rabbitmq.conf fragment and the definitions file of s.
func (s settings) render() (conf, defs []byte, err error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	var c bytes.Buffer
	c.WriteString("# Written by harness/rabbitmq for this container.\n")
	c.WriteString("loopback_users.guest = false\n")
	// The node seeds its default user into an empty database before it
	// loads the definitions; naming the administrator here keeps a guest
	// with every permission from appearing beside it.
	fmt.Fprintf(&c, "default_user = %s\ndefault_pass = %s\n", s.admin.name, s.admin.password)
	fmt.Fprintf(&c, "load_definitions = %s\n", DefinitionsFile)
	for _, l := range s.config {
		c.WriteString(l + "\n")
	}
	defs, err = s.definitions()
	if err != nil {
		return nil, nil, err
	}
	return c.Bytes(), defs, nil
}

// definitions is RabbitMQ's definitions document: the users with salted
// hashes (never the passwords), the virtual hosts, and the permissions,
// the administrator's on every virtual host first.
func (s settings) definitions() ([]byte, error) {
	type defUser struct {
		Name             string   `json:"name"`
		PasswordHash     string   `json:"password_hash"`
		HashingAlgorithm string   `json:"hashing_algorithm"`
		Tags             []string `json:"tags"`
	}
	type vhost struct {
		Name string `json:"name"`
	}
	var doc struct {
		Users       []defUser    `json:"users"`
		Vhosts      []vhost      `json:"vhosts"`
		Permissions []permission `json:"permissions"`
	}
	for _, u := range append([]user{s.admin}, s.users...) {
		h, err := passwordHash(u.password)
		if err != nil {
			return nil, err
		}
		tags := u.tags
		if tags == nil {
			tags = []string{}
		}
		doc.Users = append(doc.Users, defUser{Name: u.name, PasswordHash: h, HashingAlgorithm: hashingAlgorithm, Tags: tags})
	}
	for _, v := range append([]string{"/"}, s.vhosts...) {
		doc.Vhosts = append(doc.Vhosts, vhost{Name: v})
		doc.Permissions = append(doc.Permissions, permission{User: s.admin.name, Vhost: v, Configure: ".*", Write: ".*", Read: ".*"})
	}
	doc.Permissions = append(doc.Permissions, s.perms...)
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode definitions: %w", err)
	}
	return append(b, '\n'), nil
}

// passwordHash is RabbitMQ's rabbit_password_hashing_sha256 of password:
// base64(salt ‖ sha256(salt ‖ password)) with a 4-byte random salt.
func passwordHash(password string) (string, error) {
	salt := make([]byte, 4)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("make salt: %w", err)
	}
	return hashWithSalt(salt, password), nil
}

func hashWithSalt(salt []byte, password string) string {
	sum := sha256.Sum256(append(slices.Clone(salt), password...))
	return base64.StdEncoding.EncodeToString(append(slices.Clone(salt), sum[:]...))
}
