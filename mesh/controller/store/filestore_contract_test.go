package store_test

import (
	"path/filepath"
	"testing"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/controller/storetest"
)

// TestFileStoreKeepsTheContract runs the contract every store keeps on the
// state directory, one not yet made for each case.
func TestFileStoreKeepsTheContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		dir := filepath.Join(t.TempDir(), "state")
		return func() store.Store { return store.FileStore(dir) }
	})
}
