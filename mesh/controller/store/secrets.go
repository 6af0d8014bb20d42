package store

import "encoding/json"

// Secret is one principal's password and its bcrypt hash. The password is
// kept so that credential documents can be rewritten (a new bus address)
// without revoking anyone.
type Secret struct {
	Password string `json:"password"`
	Hash     string `json:"hash"`
}

// Secrets maps user names to their secrets.
type Secrets map[string]Secret

// Hashes are the secrets' bcrypt hashes by user, as the composed
// configuration carries them.
func (s Secrets) Hashes() map[string]string {
	out := make(map[string]string, len(s))
	for u, sec := range s {
		out[u] = sec.Hash
	}
	return out
}

func (s Secrets) marshal() []byte {
	b, _ := json.MarshalIndent(s, "", "  ") // a map of strings always marshals
	return append(b, '\n')
}
