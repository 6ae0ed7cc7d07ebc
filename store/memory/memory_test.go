package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/storetest"
)

// openMemory opens a memory store on clk, closed when the test ends.
func openMemory(t testing.TB, clk clock.Clock) store.Store {
	t.Helper()
	s, err := memory.New(memory.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store { return openMemory(t, clk) })
}

func TestOwnReaperLoop(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New()
	s, err := memory.New(memory.Config{Clock: clk, ReapInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	woken := s.Wakeup("q")
	if err := clk.BlockUntil(ctx, 1); err != nil { // the reaper's ticker
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	<-woken // the reaper returned the message and woke receivers
	st, err := s.Stats(ctx, "q")
	if err != nil || st.Pending != 1 || st.Processing != 0 {
		t.Fatalf("after the reaper ran: %+v, %v", st, err)
	}
}

func TestRejectsNegativeReapInterval(t *testing.T) {
	if _, err := memory.New(memory.Config{ReapInterval: -time.Second}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("New with a negative ReapInterval = %v", err)
	}
}
