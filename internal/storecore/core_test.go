package storecore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
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

// blockingClaims is a backend whose claims wait for release, and which
// records whether a claim was still running when it was closed.
type blockingClaims struct {
	storecore.Backend
	started, release chan struct{}
	running          atomic.Bool
	closedMidClaim   atomic.Bool
}

func (b *blockingClaims) Claim(context.Context, store.Claim) ([]store.Delivery, error) {
	b.running.Store(true)
	close(b.started)
	<-b.release
	b.running.Store(false)
	return nil, nil
}

func (b *blockingClaims) Close() error {
	b.closedMidClaim.Store(b.running.Load())
	return nil
}

// Close waits for the operations in flight: none changes anything once
// Close has returned, and the backend is never closed under one.
func TestCloseWaitsForOperationsInFlight(t *testing.T) {
	b := &blockingClaims{started: make(chan struct{}), release: make(chan struct{})}
	s := storecore.New(storecore.Config{Name: "x store", Wakeups: new(storecore.Wakeups)}, b)
	claimed := make(chan error, 1)
	go func() {
		_, err := s.Claim(context.Background(), store.Claim{Queue: "q", Max: 1, LeaseDuration: time.Second})
		claimed <- err
	}()
	<-b.started
	closed := make(chan bool, 1)
	go func() {
		s.Close()
		closed <- b.running.Load()
	}()
	// Give a Close that does not wait every chance to return early.
	for i := 0; i < 1000 && len(closed) == 0; i++ {
		runtime.Gosched()
	}
	close(b.release)
	if err := <-claimed; err != nil {
		t.Fatalf("the claim in flight: %v", err)
	}
	if <-closed || b.closedMidClaim.Load() {
		t.Fatal("Close returned, or closed the backend, while a claim was running")
	}
	if _, err := s.Claim(context.Background(), store.Claim{Queue: "q", Max: 1, LeaseDuration: time.Second}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Claim after Close: %v, want ErrClosed", err)
	}
}
