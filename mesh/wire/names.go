package wire

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadName is wrapped by every name check in this package.
var ErrBadName = errors.New("invalid name")

// CheckName reports whether s can be used as a node, module, seat, person
// or token name. Such a name becomes one subject token, part of a durable
// consumer name (which may not contain a dot) and part of a user name, so
// it is restricted to lower-case letters, digits and '-', starts with a
// letter, and is at most 32 bytes long.
func CheckName(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrBadName)
	}
	if len(s) > 32 {
		return fmt.Errorf("%w: %q is longer than 32 bytes", ErrBadName, s)
	}
	if s[0] < 'a' || s[0] > 'z' {
		return fmt.Errorf("%w: %q must start with a lower-case letter", ErrBadName, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' {
			continue
		}
		return fmt.Errorf("%w: %q has %q at byte %d (allowed: a-z 0-9 -)", ErrBadName, s, c, i)
	}
	return nil
}

// CheckKey reports whether s can be an event key or a tool name: one or
// more dot-separated tokens, each a valid name token ([a-z0-9_-], starting
// with a letter). Keys are dotted (design 19's provisioner.failing), tool
// names use '_' (provisioner_retire_approve).
func CheckKey(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty key", ErrBadName)
	}
	for _, tok := range strings.Split(s, ".") {
		if err := checkKeyToken(tok, false); err != nil {
			return fmt.Errorf("%w in key %q", err, s)
		}
	}
	return nil
}

// CheckKeyPattern is CheckKey with the subject wildcards allowed: '*' as a
// whole token anywhere and '>' as the whole last token.
func CheckKeyPattern(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty pattern", ErrBadName)
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		if tok == "*" || (tok == ">" && i == len(toks)-1) {
			continue
		}
		if err := checkKeyToken(tok, false); err != nil {
			return fmt.Errorf("%w in pattern %q", err, s)
		}
	}
	return nil
}

// CheckToolName reports whether s can name a tool: a single token, since
// the tool is the last token of its subject and a dotted tool name would
// collide with a wildcard grant on another tool.
func CheckToolName(s string) error {
	return checkKeyToken(s, true)
}

func checkKeyToken(tok string, whole bool) error {
	what := "token"
	if whole {
		what = "tool name"
	}
	if tok == "" {
		return fmt.Errorf("%w: empty %s", ErrBadName, what)
	}
	if len(tok) > 64 {
		return fmt.Errorf("%w: %s %q is longer than 64 bytes", ErrBadName, what, tok)
	}
	if tok[0] < 'a' || tok[0] > 'z' {
		return fmt.Errorf("%w: %s %q must start with a lower-case letter", ErrBadName, what, tok)
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' {
			continue
		}
		return fmt.Errorf("%w: %s %q has %q at byte %d (allowed: a-z 0-9 _ -)", ErrBadName, what, tok, c, i)
	}
	return nil
}

// MatchKey reports whether key matches pattern, with NATS subject wildcard
// semantics over dot-separated tokens. Implementations use it to decide
// locally which handlers want a delivery (design 19, "The consumer").
func MatchKey(pattern, key string) bool {
	p := strings.Split(pattern, ".")
	k := strings.Split(key, ".")
	for i, tok := range p {
		if tok == ">" {
			return i == len(p)-1 && len(k) > i
		}
		if i >= len(k) {
			return false
		}
		if tok != "*" && tok != k[i] {
			return false
		}
	}
	return len(p) == len(k)
}
