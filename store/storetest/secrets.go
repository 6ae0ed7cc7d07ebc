package storetest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/store"
)

// A server secret is 32 bytes made on the first call for its name and the
// same on every later call, also when the first calls come at once; each
// name has its own.
func testServerSecret(t *testing.T, f Factory) {
	b := setup(t, f)
	const callers = 8
	got := make([][]byte, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { got[i], errs[i] = b.s.ServerSecret(b.ctx, "serve") })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("ServerSecret, caller %d: %v", i, errs[i])
		}
		if len(got[i]) != 32 {
			t.Fatalf("ServerSecret, caller %d: %d bytes, want 32", i, len(got[i]))
		}
		if !bytes.Equal(got[i], got[0]) {
			t.Fatalf("concurrent first calls got different secrets: %x and %x", got[0], got[i])
		}
	}
	if bytes.Equal(got[0], make([]byte, 32)) {
		t.Fatal("the secret is all zeros")
	}
	again, err := b.s.ServerSecret(b.ctx, "serve")
	if err != nil || !bytes.Equal(again, got[0]) {
		t.Fatalf("a later call: %x, %v; want %x", again, err, got[0])
	}
	// What a caller does with its copy does not reach the store's.
	again[0] ^= 0xff
	if third, err := b.s.ServerSecret(b.ctx, "serve"); err != nil || !bytes.Equal(third, got[0]) {
		t.Fatalf("after a caller changed its copy: %x, %v; want %x", third, err, got[0])
	}
	other, err := b.s.ServerSecret(b.ctx, "other")
	if err != nil || len(other) != 32 || bytes.Equal(other, got[0]) {
		t.Fatalf("another name's secret: %x, %v; want 32 bytes of its own", other, err)
	}
	for _, name := range []string{"", strings.Repeat("n", 81)} {
		if _, err := b.s.ServerSecret(b.ctx, name); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("ServerSecret(%d bytes of name) = %v, want ErrInvalid", len(name), err)
		}
	}
}

// CheckWrite commits on an open store and reports a closed one.
func testCheckWrite(t *testing.T, f Factory) {
	b := setup(t, f)
	for range 2 {
		if err := b.s.CheckWrite(b.ctx); err != nil {
			t.Fatalf("CheckWrite on an open store: %v", err)
		}
	}
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.s.CheckWrite(b.ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("CheckWrite after Close = %v, want ErrClosed", err)
	}
	if _, err := b.s.ServerSecret(b.ctx, "serve"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("ServerSecret after Close = %v, want ErrClosed", err)
	}
}

// CheckSecretShared checks what no single store shows: stores that open
// calls on one database, as separate processes would, and that ask for a
// secret at once get the same one, and so does a store opened after they
// are closed, as after a restart. open arranges for each store to be
// closed when the test ends; closing one twice must be harmless.
func CheckSecretShared(t *testing.T, open func() store.Store) {
	t.Helper()
	ctx := context.Background()
	a, b := open(), open()
	var sa, sb []byte
	var ea, eb error
	var wg sync.WaitGroup
	wg.Go(func() { sa, ea = a.ServerSecret(ctx, "serve") })
	wg.Go(func() { sb, eb = b.ServerSecret(ctx, "serve") })
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatal(ea, eb)
	}
	if !bytes.Equal(sa, sb) || len(sa) != 32 {
		t.Fatalf("two stores of one database got %x and %x", sa, sb)
	}
	a.Close()
	b.Close()
	if sc, err := open().ServerSecret(ctx, "serve"); err != nil || !bytes.Equal(sc, sa) {
		t.Fatalf("a store opened later: %x, %v; want %x", sc, err, sa)
	}
}

// CheckReadOnly checks ro, a store whose database refuses writes (a
// read-only file, a read-only session, a standby), opened on the database
// of rw: Ping answers, CheckWrite fails, and a secret that exists is read
// without a write; rw takes writes.
func CheckReadOnly(t *testing.T, rw, ro store.Store) {
	t.Helper()
	ctx := context.Background()
	secret, err := rw.ServerSecret(ctx, "serve")
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.CheckWrite(ctx); err != nil {
		t.Fatalf("CheckWrite on a writable database: %v", err)
	}
	if err := ro.Ping(ctx); err != nil {
		t.Fatalf("Ping of a read-only database: %v", err)
	}
	if err := ro.CheckWrite(ctx); err == nil {
		t.Fatal("CheckWrite passed on a read-only database")
	}
	if got, err := ro.ServerSecret(ctx, "serve"); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("ServerSecret of a read-only database: %x, %v; want %x", got, err, secret)
	}
}
