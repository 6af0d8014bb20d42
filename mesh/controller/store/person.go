package store

import "time"

// Person is a person issued a user on the bus by mesh-controller person
// issue (design 25 §7): a user whose grant is the tools it may call,
// composed like any principal, its credential sealed to the person's own
// key. The description's persons are composed as well; a person is one or
// the other, never both.
type Person struct {
	Name string `json:"name"`
	// Tools are the tools it may call, as meshdesc.Person.Tools: each
	// "<module or seat>.<tool>" or "<module or seat>.*", or "*" alone (an
	// administrator: every tool the manifests declare).
	Tools []string `json:"tools"`
	// SealingKey is the person's public key (seal.EncodePublic), which its
	// credential was sealed to.
	SealingKey string    `json:"sealing_key"`
	Issued     time.Time `json:"issued"`
}

// Admin is the grant of an administrator: every tool the manifests
// declare, resolved again by each composition.
var Admin = []string{"*"}
