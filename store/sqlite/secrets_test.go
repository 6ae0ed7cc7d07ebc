package sqlite_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/store/sqlite"
)

// Two processes' stores of one file that ask for a secret at once get the
// same one, and so does a store that opens the file later.
func TestServerSecretSharedByStoresOfAFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lh.db")
	openAt := func() *sqlite.Store {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := openAt(), openAt()
	var sa, sb []byte
	var ea, eb error
	var wg sync.WaitGroup
	wg.Go(func() { sa, ea = a.ServerSecret(ctx, "serve") })
	wg.Go(func() { sb, eb = b.ServerSecret(ctx, "serve") })
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatal(ea, eb)
	}
	if !bytes.Equal(sa, sb) {
		t.Fatalf("two stores of one file got %x and %x", sa, sb)
	}
	a.Close()
	b.Close()
	c := openAt()
	defer c.Close()
	if sc, err := c.ServerSecret(ctx, "serve"); err != nil || !bytes.Equal(sc, sa) {
		t.Fatalf("after a restart: %x, %v; want %x", sc, err, sa)
	}
}

// CheckWrite fails where writes fail, while Ping and the reading of a
// secret that exists still answer: here on a
// connection that SQLite opened read-only (mode=ro).
func TestCheckWriteOnAReadOnlyDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lh.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckWrite(ctx); err != nil {
		t.Fatalf("CheckWrite on a writable file: %v", err)
	}
	secret, err := s.ServerSecret(ctx, "serve")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro, err := sqlite.Open(ctx, sqlite.Config{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Ping(ctx); err != nil {
		t.Fatalf("Ping of a read-only store: %v", err)
	}
	if err := ro.CheckWrite(ctx); err == nil {
		t.Fatal("CheckWrite passed on a store opened read-only")
	}
	// A secret that exists is read without a write.
	if got, err := ro.ServerSecret(ctx, "serve"); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("ServerSecret of a read-only store: %x, %v; want %x", got, err, secret)
	}

}
