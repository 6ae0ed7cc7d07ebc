package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// gateStore holds the Release of one message until gate is closed or the
// call's context ends.
type gateStore struct {
	*spyStore
	blockID  atomic.Int64
	gate     chan struct{}
	inFlight atomic.Int32
}

func (s *gateStore) Release(ctx context.Context, r store.Release) error {
	if r.MessageID == s.blockID.Load() {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.spyStore.Release(ctx, r)
}

// At a hard stop, a job settling its own message is waited for; an
// abandoned handler that returns meanwhile is not taken for it.
func TestHardStopWaitsForTheJobsSettling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gateStore{spyStore: newStore(t), gate: make(chan struct{})}
		unblockB := make(chan struct{})
		started := make(chan struct{}, 2)
		w := newWorker(t, worker.Config{Deps: with(st), Queues: queues(2),
			LeaseDuration: 30 * time.Second, ShutdownTimeout: 2 * time.Second, HardStopWait: time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				started <- struct{}{}
				if m.Key == "B" {
					<-unblockB // ignores its context
					return nil
				}
				return sleepCtx(ctx, time.Hour) // A returns when cancelled
			})})
		res, err := st.Enqueue(context.Background(), []store.NewMessage{{Queue: queue, Key: "A"}, {Queue: queue, Key: "B"}})
		if err != nil {
			t.Fatal(err)
		}
		st.blockID.Store(res[0].ID)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(context.Background()) }()
		<-started
		<-started
		go func() { _ = w.Shutdown(context.Background()) }()
		time.Sleep(3500 * time.Millisecond) // past ShutdownTimeout and HardStopWait
		synctest.Wait()
		if st.inFlight.Load() != 1 {
			t.Fatal("A's release is not in flight")
		}
		close(unblockB) // the abandoned handler returns now
		synctest.Wait()
		select {
		case err := <-ran:
			t.Fatalf("Run returned (%v) while A's release was still in flight", err)
		default:
		}
		close(st.gate)
		if err := <-ran; !errors.Is(err, worker.ErrShutdown) {
			t.Fatalf("Run = %v, want a hard stop", err)
		}
	})
}

// A maximum processing time of "forever" does not keep the keeper from
// finding an expired lease. On the fake clock, whose monotonic readings
// start at zero, the sum of a reading and the limit would wrap around.
func TestUnboundedLimitKeepsExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		clk.Advance(time.Second)
		mem, err := memory.New(memory.Config{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		st := &spyStore{Store: mem}
		st.setExtendErr(func() error { return errors.New("database unreachable") })
		causes := make(chan error, 1)
		w := newWorker(t, worker.Config{Deps: maintenance.Deps{Store: st, Clock: clk}, LeaseDuration: time.Second,
			MaxProcessingTime: time.Hour, ReapInterval: noReaper,
			Kinds: map[string]worker.KindConfig{"forever": {MaxProcessingTime: math.MaxInt64}},
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return nil
			})})
		if _, err := st.Enqueue(context.Background(), []store.NewMessage{{Queue: queue, Kind: "forever", Payload: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
		go w.Run(context.Background())
		defer w.Stop()
		synctest.Wait()
		for range 30 {
			clk.Advance(100 * time.Millisecond)
			synctest.Wait()
			select {
			case err := <-causes:
				if !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("cause %v, want ErrLeaseLost", err)
				}
				return
			default:
			}
		}
		t.Fatal("3 s after a 1 s lease that was never renewed, the handler still ran")
	})
}

// A handler's slot is free once it succeeds: the next message runs while
// the completion of the last is on its way. The completions waiting are
// bounded (handlers wait, slots held, for room in the completer's queue),
// and a graceful stop waits for them: each message handled is completed,
// and the others stay pending.
func TestSlotFreeWhileCompletionPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		gate := make(chan struct{})
		st.completeErr = func() error { <-gate; return nil }
		var handled atomic.Int64
		enqueue(t, st, 20)
		w, ran := runWorker(t, st, worker.Config{Queues: queues(2),
			Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error {
				handled.Add(1)
				return nil
			})})
		synctest.Wait()
		// Once all wait: 2 handlers waiting with their slots, 2 jobs in the
		// completer's queue, and its batch of 1 or 2.
		n := handled.Load()
		if n < 5 || n > 6 {
			t.Fatalf("%d handlers ran while the first completion was held; want 5 or 6", n)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- w.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-ran:
			t.Fatalf("Run returned (%v) with completions pending", err)
		default:
		}
		close(gate)
		if err := <-ran; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if err := <-stopped; err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
		n = handled.Load()
		wantStates(t, st, map[store.State]int{store.Completed: int(n), store.Pending: 20 - int(n)})
	})
}

// wantStates fails t unless the queue's messages in each state of want
// are as many as it says.
func wantStates(t *testing.T, st store.Store, want map[store.State]int) {
	t.Helper()
	for state, n := range want {
		infos, err := st.List(context.Background(), store.ListFilter{Queue: queue, State: state, Limit: store.MaxBatch})
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != n {
			t.Errorf("%d messages in state %v, want %d", len(infos), state, n)
		}
	}
}

// hangingCompletes never answers Complete until its context ends.
type hangingCompletes struct{ *spyStore }

func (h *hangingCompletes) Complete(ctx context.Context, cs []store.Completion) ([]error, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A stop waits for completions whose slots came back: the drain for the
// shutdown timeout, and the hard stop HardStopWait, as for every job
// settling its message; then it cancels them. Run returns, and their
// messages keep their leases, to be delivered again when those run out.
// With 2 slots and 10 messages, handlers wait for room in the
// completer's queue; with 4 slots and 2 messages, every pending
// completion has its slot back.
func TestHardStopCancelsPendingCompletions(t *testing.T) {
	for _, c := range []struct{ slots, msgs int }{{2, 10}, {4, 2}} {
		t.Run(fmt.Sprintf("%d slots, %d messages", c.slots, c.msgs), func(t *testing.T) {
			hardStopWithPendingCompletions(t, c.slots, c.msgs)
		})
	}
}

func hardStopWithPendingCompletions(t *testing.T, slots, msgs int) {
	synctest.Test(t, func(t *testing.T) {
		spy := newStore(t)
		var handled atomic.Int64
		enqueue(t, spy, msgs)
		w, ran := runWorker(t, &hangingCompletes{spy}, worker.Config{Queues: queues(slots),
			ShutdownTimeout: time.Second, HardStopWait: time.Second,
			Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error {
				handled.Add(1)
				return nil
			})})
		synctest.Wait()
		t0 := time.Now()
		go func() { _ = w.Shutdown(context.Background()) }()
		if err := recv(t, ran, time.Minute); !errors.Is(err, worker.ErrShutdown) {
			t.Fatalf("Run = %v, want a hard stop", err)
		}
		// The shutdown timeout, HardStopWait for the jobs, and HardStopWait
		// more for those settling their messages.
		if took := time.Since(t0); took != 3*time.Second {
			t.Fatalf("Run returned %s after the shutdown began; want 3s", took)
		}
		n := int(handled.Load())
		wantStates(t, spy, map[store.State]int{store.Completed: 0, store.Processing: n, store.Pending: msgs - n})
	})
}
