package sqsapi

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// Requests that arrive while a call is in flight share the next call, and
// each gets the results of its own items.
func TestCoalescerSharesCalls(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var calls [][]int
	var mu sync.Mutex
	c := newCoalescer(func(_ context.Context, items []int) ([]int, error) {
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
	c := newCoalescer(func(context.Context, []int) ([]int, error) { return nil, boom })
	if _, err := c.do(context.Background(), []int{1}); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}
