package storecore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// The store's own errors pass as they are; any other names the backend and
// the operation.
func TestFailedNamesBackendAndOperation(t *testing.T) {
	s := storecore.New(storecore.Config{Name: "x store", Wakeups: new(storecore.Wakeups)}, nil)
	for _, sentinel := range []error{store.ErrLeaseLost, store.ErrNotFound, store.ErrInvalid, store.ErrClosed, store.ErrNotMigrated} {
		err := fmt.Errorf("message 1: %w", sentinel)
		if got := s.Failed("claim", err); got != err {
			t.Errorf("Failed(%v) = %v, want it unchanged", err, got)
		}
	}
	cause := errors.New("connection reset")
	if got := s.Failed("claim", cause); got.Error() != "x store: claim: connection reset" || !errors.Is(got, cause) {
		t.Errorf("Failed = %v, want the backend and operation named, wrapping the cause", got)
	}
	if s.Failed("claim", nil) != nil {
		t.Error("Failed(nil) is not nil")
	}
}

// closesOnly is a backend that can only be closed: any other call would
// panic on the nil interface it embeds.
type closesOnly struct{ storecore.Backend }

func (closesOnly) Close() error { return nil }

// A closed store refuses every operation with ErrClosed, before its backend
// sees it.
func TestClosedStoreRefuses(t *testing.T) {
	s := storecore.New(storecore.Config{Name: "x store", Wakeups: new(storecore.Wakeups)}, closesOnly{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ctx := t.Context()
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q"}}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Enqueue after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Claim(ctx, store.Claim{Queue: "q", Max: 1, LeaseDuration: time.Second}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Claim after Close: %v, want ErrClosed", err)
	}
	if err := s.Release(ctx, store.Release{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Release after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Stats(ctx, "q"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Stats after Close: %v, want ErrClosed", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ping after Close: %v, want ErrClosed", err)
	}
}
