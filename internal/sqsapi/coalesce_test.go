package sqsapi

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/clock"
)

// held is a coalescer whose first call waits for release, so that a
// test can line requests up behind it; each call's items are recorded,
// and each item's result is ten times the item.
type held struct {
	c        *coalescer[int, int]
	entered  chan struct{} // closed when the first call has begun
	release  chan struct{} // close to let the first call end
	mu       sync.Mutex
	recorded [][]int
}

func newHeld() *held {
	h := &held{entered: make(chan struct{}), release: make(chan struct{})}
	h.c = newCoalescer(clock.System(), func(_ context.Context, items []int) ([]int, error) {
		h.mu.Lock()
		h.recorded = append(h.recorded, slices.Clone(items))
		first := len(h.recorded) == 1
		h.mu.Unlock()
		if first {
			close(h.entered)
			<-h.release
		}
		out := make([]int, len(items))
		for i, v := range items {
			out[i] = v * 10
		}
		return out, nil
	})
	return h
}

// awaitWaiting waits until n requests wait behind the call in flight.
func (h *held) awaitWaiting(n int) {
	for {
		h.c.mu.Lock()
		w := len(h.c.waiting)
		h.c.mu.Unlock()
		if w == n {
			return
		}
		runtime.Gosched()
	}
}

func (h *held) calls() [][]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recorded)
}

// Requests that arrive while a call is in flight share the next call, and
// each gets the results of its own items.
func TestCoalescerSharesCalls(t *testing.T) {
	h := newHeld()
	ctx := context.Background()
	results := make([][]int, 4)
	var wg sync.WaitGroup
	wg.Go(func() { results[0], _ = h.c.do(ctx, []int{1}) })
	<-h.entered
	for i, items := range [][]int{{2, 3}, {4}, {5, 6, 7}} {
		wg.Go(func() { results[i+1], _ = h.c.do(ctx, items) })
	}
	h.awaitWaiting(3)
	close(h.release)
	wg.Wait()
	if calls := h.calls(); len(calls) != 2 || len(calls[1]) != 6 {
		t.Fatalf("calls %v, want [1] and then the other six items in one", calls)
	}
	want := [][]int{{10}, {20, 30}, {40}, {50, 60, 70}}
	for i := range want {
		if !slices.Equal(results[i], want[i]) {
			t.Fatalf("request %d got %v, want %v", i, results[i], want[i])
		}
	}
}

func TestCoalescerSharesErrors(t *testing.T) {
	boom := errors.New("boom")
	c := newCoalescer(clock.System(), func(context.Context, []int) ([]int, error) { return nil, boom })
	if _, err := c.do(context.Background(), []int{1}); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

// A call that panics or answers short fails its requests and leaves the
// coalescer free for the next call.
func TestCoalescerSurvivesBadCalls(t *testing.T) {
	calls := 0
	c := newCoalescer(clock.System(), func(_ context.Context, items []int) ([]int, error) {
		calls++
		switch calls {
		case 1:
			panic("store exploded")
		case 2:
			return nil, nil
		}
		return items, nil
	})
	ctx := context.Background()
	if _, err := c.do(ctx, []int{1}); err == nil {
		t.Fatal("a panicking call reported no error")
	}
	if _, err := c.do(ctx, []int{1}); err == nil {
		t.Fatal("a short answer reported no error")
	}
	if out, err := c.do(ctx, []int{7}); err != nil || !slices.Equal(out, []int{7}) {
		t.Fatalf("the call after = %v, %v", out, err)
	}
}

// A request that gives up while it waits leaves: its items are in no call.
func TestCoalescerWaiterLeaves(t *testing.T) {
	h := newHeld()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = h.c.do(context.Background(), []int{1}) })
	<-h.entered
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := h.c.do(ctx, []int{2}); left <- err }()
	stays := make(chan []int, 1)
	wg.Go(func() { out, _ := h.c.do(context.Background(), []int{3}); stays <- out })
	h.awaitWaiting(2)
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request that gave up got %v", err)
	}
	close(h.release)
	wg.Wait()
	if out := <-stays; !slices.Equal(out, []int{30}) {
		t.Fatalf("the request that stayed got %v", out)
	}
	if calls := h.calls(); len(calls) != 2 || !slices.Equal(calls[1], []int{3}) {
		t.Fatalf("calls %v, want [1] then [3]", calls)
	}
}
