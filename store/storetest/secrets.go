package storetest

import (
	"bytes"
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
