package sqsapi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
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

// gatedClaims is a store whose claims wait for release once entered.
type gatedClaims struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (g gatedClaims) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Store.Claim(ctx, c)
}

// The shared claims keep an entry only while a receive uses it: receives
// of many queues under many visibility timeouts, one after another, leave
// the map empty, and concurrent receives of one queue and lease share
// one entry while they run.
func TestSharedClaimsForgetIdleQueues(t *testing.T) {
	clk := clocktest.New()
	mem, err := memory.New(memory.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	ctx := context.Background()
	s := &sharedClaims{Store: mem, clk: clk, claims: map[claimKey]*sharedClaim{}}
	for i := range 2000 {
		q := fmt.Sprintf("temporary-%d", i)
		if _, err := mem.Enqueue(ctx, []store.NewMessage{{Queue: q}}); err != nil {
			t.Fatal(err)
		}
		ds, err := s.Claim(ctx, store.Claim{Queue: q, WorkerID: "w", Max: 1, LeaseDuration: time.Duration(i%7+1) * time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Claim of %s = %d, %v", q, len(ds), err)
		}
		clk.Advance(time.Second)
	}
	if n := len(s.claims); n != 0 {
		t.Fatalf("%d shared-claim entries kept after every receive ended, want 0", n)
	}

	g := gatedClaims{Store: mem, entered: make(chan struct{}), release: make(chan struct{})}
	s.Store = g
	if _, err := mem.Enqueue(ctx, []store.NewMessage{{Queue: "q"}, {Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
			if err != nil {
				t.Error(err)
			}
			got <- len(ds)
		})
	}
	<-g.entered // the first receive's call; the second waits behind it
	for {
		s.mu.Lock()
		sc, n := s.claims[claimKey{"q", time.Minute}], len(s.claims)
		users := 0
		if sc != nil {
			users = sc.users
		}
		s.mu.Unlock()
		if users == 2 {
			if n != 1 {
				t.Fatalf("%d entries for one queue and lease", n)
			}
			break
		}
		runtime.Gosched()
	}
	g.release <- struct{}{}
	<-g.entered // the second receive's call
	g.release <- struct{}{}
	wg.Wait()
	if a, b := <-got, <-got; a+b != 2 {
		t.Fatalf("the receives got %d and %d messages, want 2 in all", a, b)
	}
	if n := len(s.claims); n != 0 {
		t.Fatalf("%d shared-claim entries kept after the receives ended, want 0", n)
	}
}
