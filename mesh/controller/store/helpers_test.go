package store

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sampleState is a genesis as the controller makes one, with documents
// and hashes that need no minting (the store holds what it is given; the
// minting is the composition's, a layer up).
func sampleState(t *testing.T) State {
	t.Helper()
	ca, err := pki.NewCA("store test mesh authority", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	st := State{Secrets: Secrets{}, Authority: ca, DeclarationKey: key, Credentials: map[string][]byte{}}
	for _, u := range []string{wire.ControllerUser, wire.ControllerMeshUser, wire.HostUser("node-a"), wire.ModuleUser("node-a", "pg"), wire.EnrolUser("tok-1")} {
		st.Secrets[u] = Secret{Password: "pw-" + u, Hash: "$2a$04$hash-of-" + u}
		st.Credentials[u] = []byte(fmt.Sprintf("{\n  \"url\": \"tls://%s:pw-%s@bus:4222\"\n}\n", u, u))
	}
	return st
}

// genesisStore is a state directory holding sampleState, and its file
// store.
func genesisStore(t *testing.T) *fileStore {
	t.Helper()
	s := newFileStore(filepath.Join(t.TempDir(), "state"))
	if err := s.Create(ctxT(t), sampleState(t)); err != nil {
		t.Fatalf("create: %v", err)
	}
	return s
}
