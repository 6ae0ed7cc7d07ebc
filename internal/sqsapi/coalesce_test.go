package sqsapi

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/clock"
)

// Requests that arrive while a call is in flight share the next call, and
// each gets the results of its own items.
func TestCoalescerSharesCalls(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var calls [][]int
	var mu sync.Mutex
	c := newCoalescer(clock.System(), func(_ context.Context, items []int) ([]int, error) {
		mu.Lock()
		calls = append(calls, slices.Clone(items))
		first := len(calls) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
		out := make([]int, len(items))
		for i, v := range items {
			out[i] = v * 10
		}
		return out, nil
	})
	ctx := context.Background()
	results := make([][]int, 4)
	var wg sync.WaitGroup
	wg.Go(func() { results[0], _ = c.do(ctx, []int{1}) })
	<-entered
	for i, items := range [][]int{{2, 3}, {4}, {5, 6, 7}} {
		wg.Go(func() { results[i+1], _ = c.do(ctx, items) })
	}
	// Wait until the three have joined the queue behind the call in
	// flight.
	for {
		c.mu.Lock()
		n := len(c.waiting)
		c.mu.Unlock()
		if n == 3 {
			break
		}
	}
	close(release)
	wg.Wait()
	if len(calls) != 2 || len(calls[1]) != 6 {
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
	entered := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var calls [][]int
	c := newCoalescer(clock.System(), func(_ context.Context, items []int) ([]int, error) {
		mu.Lock()
		calls = append(calls, slices.Clone(items))
		first := len(calls) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
		return items, nil
	})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.do(context.Background(), []int{1}) })
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := c.do(ctx, []int{2}); left <- err }()
	stays := make(chan []int, 1)
	wg.Go(func() { out, _ := c.do(context.Background(), []int{3}); stays <- out })
	for {
		c.mu.Lock()
		n := len(c.waiting)
		c.mu.Unlock()
		if n == 2 {
			break
		}
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request that gave up got %v", err)
	}
	close(release)
	wg.Wait()
	if out := <-stays; !slices.Equal(out, []int{3}) {
		t.Fatalf("the request that stayed got %v", out)
	}
	if len(calls) != 2 || !slices.Equal(calls[1], []int{3}) {
		t.Fatalf("calls %v, want [1] then [3]", calls)
	}
}
