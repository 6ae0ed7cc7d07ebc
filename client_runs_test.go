package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store"
)

type step struct {
	N int `json:"n"`
}

func (step) Kind() string { return "step" }

// WorkOpts retries at once, so that the test waits for nothing.
func (step) WorkOpts() leasehold.WorkOptions {
	return leasehold.WorkOptions{RetryDelay: func(int) time.Duration { return 0 }}
}

// claimCounter counts the messages of each claim that took any.
type claimCounter struct {
	store.Store
	mu    sync.Mutex
	sizes []int
}

func (c *claimCounter) Claim(ctx context.Context, cl store.Claim) ([]store.Delivery, error) {
	ds, err := c.Store.Claim(ctx, cl)
	if len(ds) > 0 {
		c.mu.Lock()
		c.sizes = append(c.sizes, len(ds))
		c.mu.Unlock()
	}
	return ds, err
}

// A queue with KeyRuns takes a key's jobs several to a claim and runs them
// one at a time, in order; a job that fails and is retried takes the
// rest of its run back with it, and they run after it, on their first
// delivery, never under the leases they were first claimed with.
func TestKeyRuns(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		spy := &claimCounter{Store: st}
		c := clientOf(t, spy, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {Concurrency: 5, KeyRuns: true}}})
		var mu sync.Mutex
		var runs []string
		running, overlap := 0, false
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[step]) error {
			mu.Lock()
			runs = append(runs, fmt.Sprintf("%d#%d", job.Args.N, job.Attempt))
			running++
			overlap = overlap || running > 1
			mu.Unlock()
			defer func() {
				mu.Lock()
				running--
				mu.Unlock()
			}()
			if job.Args.N == 2 && job.Attempt == 1 {
				return errors.New("boom")
			}
			return nil
		})
		for n := 1; n <= 4; n++ {
			if _, err := c.Enqueue(ctx, step{N: n}, &leasehold.EnqueueOptions{Key: "K"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		for deadline := time.Now().Add(30 * time.Second); count(t, st, "default").Completed < 4; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s: %+v, want four completed", count(t, st, "default"))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"1#1", "2#1", "2#2", "3#1", "4#1"}; !slices.Equal(runs, want) || overlap {
			t.Fatalf("ran %q (overlapping: %v), want %q one at a time", runs, overlap, want)
		}
		spy.mu.Lock()
		defer spy.mu.Unlock()
		// The retried job comes back with the rest of its run, in one
		// claim or two: one that its retry's wakeup makes may be sized
		// for the slots free before the run's end was taken.
		if len(spy.sizes) < 2 || len(spy.sizes) > 3 || spy.sizes[0] != 4 {
			t.Fatalf("claims took %v jobs, want the run of four, then the three from the retried one", spy.sizes)
		}
	})
}
