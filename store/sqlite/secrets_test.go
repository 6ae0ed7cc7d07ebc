package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
	"github.com/leasehold/leasehold/store/storetest"
)

// openAt opens the database at path, closed when the test ends.
func openAt(t *testing.T, path string, readOnly bool) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestServerSecretSharedByStoresOfAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lh.db")
	storetest.CheckSecretShared(t, func() store.Store { return openAt(t, path, false) })
}

// A store that SQLite opened read-only (mode=ro) refuses writes.
func TestCheckWriteOnAReadOnlyDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lh.db")
	rw := openAt(t, path, false)
	storetest.CheckReadOnly(t, rw, openAt(t, path, true))
}
