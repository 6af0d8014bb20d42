package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// SealedCredential is a person's credential as mesh-controller person
// issue prints it: the credential document sealed to the person's own
// key (mesh/seal), which only the person's client opens (mesh credential
// open). The controller never hands a person a credential in the clear.
type SealedCredential struct {
	// Person names whose it is.
	Person string `json:"person"`
	// Sealed is the credential document, sealed.
	Sealed []byte `json:"sealed"`
}

// ErrSealedCredential is wrapped by every refusal of a sealed credential.
var ErrSealedCredential = errors.New("not a sealed credential")

// ParseSealedCredential reads a sealed credential strictly.
func ParseSealedCredential(data []byte) (SealedCredential, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s SealedCredential
	if err := dec.Decode(&s); err != nil {
		return SealedCredential{}, fmt.Errorf("%w: %v", ErrSealedCredential, err)
	}
	if dec.More() {
		return SealedCredential{}, fmt.Errorf("%w: more than one JSON value", ErrSealedCredential)
	}
	if err := CheckName(s.Person); err != nil {
		return SealedCredential{}, fmt.Errorf("%w: person: %v", ErrSealedCredential, err)
	}
	if len(s.Sealed) == 0 {
		return SealedCredential{}, fmt.Errorf("%w: nothing sealed", ErrSealedCredential)
	}
	return s, nil
}

// Marshal renders the document as indented JSON with a final newline.
func (s SealedCredential) Marshal() []byte {
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}
