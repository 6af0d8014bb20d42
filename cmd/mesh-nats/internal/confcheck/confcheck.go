// Package confcheck decides whether a nats-server configuration file is
// whole and keeps the bus closed, before the entrypoint lets the server
// load it (issue 7 §2).
//
// The mesh composes its configuration in the server's JSON syntax, so a
// whole file is one strict JSON document: a strict prefix of a JSON object
// is never valid JSON, which makes this a sharp test for a file caught
// half-written. nats-server's own parser is far more forgiving (it accepts
// dozens of prefixes of the composed file, among them one with no users at
// all, which lets anonymous clients in), so it is asked only after this
// check passes, by the caller.
//
// The check knows the structure nats-server gives a configuration, never
// the mesh's account or user names: the composition may define one account
// or several, with or without JetStream, imports and exports.
package confcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Sentinel errors callers branch on.
var (
	// ErrNotWhole means the file is not one whole JSON document: cut
	// short, empty, followed by something else, or not JSON at all.
	ErrNotWhole = errors.New("not one whole JSON document")
	// ErrOpen means the file is whole but would let a client in without
	// the mesh's users: no accounts, no user in any of them (the server
	// then asks no client for a password), a user without a name or
	// password, or a default user for password-less clients. An account
	// may have no users of its own (one reached only through imports):
	// nobody can log in to it, and it opens nothing.
	ErrOpen = errors.New("would admit clients without a user and password")
	// ErrAmbiguous means one option is given twice (also as "Users" and
	// "users", or "pass" and "password"): nats-server reads option names
	// without regard to case and takes whichever of the two it meets
	// last, in no fixed order.
	ErrAmbiguous = errors.New("an option is given twice")
)

// Check reports why data is not a configuration the mesh may serve, or nil
// if it is. Errors wrap one of the sentinels and say where in the file the
// trouble is; they never quote a password.
func Check(data []byte) error {
	if err := whole(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parse(dec)
	if err != nil {
		// json.Valid accepted it, so this is a duplicate key.
		return err
	}
	top, ok := v.(*object)
	if !ok {
		return fmt.Errorf("%w: the top level is %s, not an object", ErrNotWhole, kind(v))
	}
	if where := find(top, "no_auth_user", "configuration"); where != "" {
		return fmt.Errorf("%w: %s sets no_auth_user, which logs clients without a password in as that user", ErrOpen, where)
	}
	if err := options(top, "the top level"); err != nil {
		return err
	}
	users, err := accounts(top)
	if err != nil {
		return err
	}
	if authz, ok := top.get("authorization"); ok {
		n, err := authorization(authz)
		if err != nil {
			return err
		}
		users += n
	}
	if users == 0 {
		return fmt.Errorf("%w: no account has a user, so the server would ask no client for a password", ErrOpen)
	}
	return nil
}

// whole checks that data is exactly one JSON value with nothing after it
// but white space, and says where it stops being so.
func whole(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	line := func(at int64) int { return 1 + bytes.Count(data[:min(int(at), len(data))], []byte("\n")) }
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	err := dec.Decode(&v)
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the file is empty", ErrNotWhole)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: it ends in the middle of a value, at byte %d (line %d): cut short?", ErrNotWhole, len(data), line(int64(len(data))))
	case errors.As(err, &syn):
		return fmt.Errorf("%w: at byte %d of %d (line %d): %v", ErrNotWhole, syn.Offset, len(data), line(syn.Offset), syn)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrNotWhole, err)
	}
	at := dec.InputOffset()
	return fmt.Errorf("%w: the document ends at byte %d of %d (line %d) and something follows it", ErrNotWhole, at, len(data), line(at))
}

// accounts checks every account's users and says how many there are in
// all.
func accounts(top *object) (int, error) {
	v, ok := top.get("accounts")
	if !ok {
		return 0, fmt.Errorf("%w: no accounts block, so no users", ErrOpen)
	}
	accts, ok := v.(*object)
	if !ok {
		return 0, fmt.Errorf("%w: accounts is %s, not an object of accounts with their users", ErrOpen, kind(v))
	}
	if len(accts.keys) == 0 {
		return 0, fmt.Errorf("%w: accounts is empty, so no users", ErrOpen)
	}
	total := 0
	for i, name := range accts.keys {
		where := fmt.Sprintf("account %q", name)
		acct, ok := accts.vals[i].(*object)
		if !ok {
			return 0, fmt.Errorf("%w: %s is %s, not an object", ErrOpen, where, kind(accts.vals[i]))
		}
		if err := options(acct, where); err != nil {
			return 0, err
		}
		users, ok := acct.get("users")
		if !ok {
			continue
		}
		n, err := userList(users, where)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// authorization checks a top-level authorization block: whatever users it
// lists, and a single user it names, must each have a password. It says
// how many users the block gives.
func authorization(v any) (int, error) {
	const where = "the authorization block"
	authz, ok := v.(*object)
	if !ok {
		return 0, fmt.Errorf("%w: %s is %s, not an object", ErrOpen, where, kind(v))
	}
	if err := options(authz, where); err != nil {
		return 0, err
	}
	n := 0
	if users, ok := authz.get("users"); ok {
		var err error
		if n, err = userList(users, where); err != nil {
			return 0, err
		}
	}
	if _, named := authz.get("user", "username"); named {
		return n + 1, user(authz, where)
	}
	return n, nil
}

// userList checks each user of a list (an empty one is no users) and says
// how many there are.
func userList(v any, where string) (int, error) {
	list, ok := v.([]any)
	if !ok {
		return 0, fmt.Errorf("%w: the users of %s are %s, not a list", ErrOpen, where, kind(v))
	}
	for i, u := range list {
		at := fmt.Sprintf("%s, users[%d]", where, i)
		entry, ok := u.(*object)
		if !ok {
			return 0, fmt.Errorf("%w: %s is %s, not an object", ErrOpen, at, kind(u))
		}
		if err := options(entry, at); err != nil {
			return 0, err
		}
		if err := user(entry, at); err != nil {
			return 0, err
		}
	}
	return len(list), nil
}

// user checks that an entry names a user and gives it a password. The
// password is never quoted: it is (a hash of) a secret.
func user(entry *object, where string) error {
	name, _ := entry.get("user", "username")
	s, ok := name.(string)
	if !ok || strings.TrimSpace(s) == "" {
		return fmt.Errorf("%w: %s has no user name", ErrOpen, where)
	}
	where = fmt.Sprintf("%s (user %q)", where, s)
	pass, _ := entry.get("password", "pass")
	if p, ok := pass.(string); !ok || p == "" {
		return fmt.Errorf("%w: %s has no password", ErrOpen, where)
	}
	return nil
}

// aliases are the option names nats-server reads as one.
var aliases = map[string]string{"username": "user", "pass": "password", "permission": "permissions"}

// options refuses an option map giving one option twice, as nats-server
// reads names: without regard to case, and with its aliases.
func options(o *object, where string) error {
	seen := map[string]string{}
	for _, k := range o.keys {
		norm := strings.ToLower(k)
		if a, ok := aliases[norm]; ok {
			norm = a
		}
		if prev, ok := seen[norm]; ok {
			return fmt.Errorf("%w: %s gives %q and %q", ErrAmbiguous, where, prev, k)
		}
		seen[norm] = k
	}
	return nil
}

// find returns where key (in any case) appears as an option name anywhere
// under v, or "" if it does not.
func find(v any, key, where string) string {
	switch v := v.(type) {
	case *object:
		for i, k := range v.keys {
			at := where + "." + k
			if strings.EqualFold(k, key) {
				return at
			}
			if got := find(v.vals[i], key, at); got != "" {
				return got
			}
		}
	case []any:
		for i, e := range v {
			if got := find(e, key, fmt.Sprintf("%s[%d]", where, i)); got != "" {
				return got
			}
		}
	}
	return ""
}

// object is a JSON object with its members in file order.
type object struct {
	keys []string
	vals []any
}

// get returns the value of the first of names present, compared without
// regard to case, as nats-server compares option names.
func (o *object) get(names ...string) (any, bool) {
	for _, name := range names {
		for i, k := range o.keys {
			if strings.EqualFold(k, name) {
				return o.vals[i], true
			}
		}
	}
	return nil, false
}

// parse reads one value from dec, keeping objects' members in order and
// refusing a member name given twice in one object.
func parse(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotWhole, err)
	}
	switch tok {
	case json.Delim('{'):
		o := &object{}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrNotWhole, err)
			}
			k, _ := kt.(string)
			if seen[k] {
				return nil, fmt.Errorf("%w: %q appears twice in one object", ErrAmbiguous, k)
			}
			seen[k] = true
			v, err := parse(dec)
			if err != nil {
				return nil, err
			}
			o.keys, o.vals = append(o.keys, k), append(o.vals, v)
		}
		if _, err := dec.Token(); err != nil { // '}'
			return nil, fmt.Errorf("%w: %w", ErrNotWhole, err)
		}
		return o, nil
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := parse(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, fmt.Errorf("%w: %w", ErrNotWhole, err)
		}
		return list, nil
	default:
		return tok, nil
	}
}

func kind(v any) string {
	switch v.(type) {
	case *object:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
