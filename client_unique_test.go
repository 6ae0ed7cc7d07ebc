package leasehold_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
)

type invoice struct {
	Customer string `json:"customer" unique:"true"`
	Month    string `json:"month" unique:"true"`
	Note     string `json:"note"`
}

func (invoice) Kind() string { return "invoice" }

type digest struct{ User string }

func (digest) Kind() string { return "digest" }

func (digest) EnqueueOpts() leasehold.EnqueueOptions {
	return leasehold.EnqueueOptions{Unique: &leasehold.UniqueOpts{ByArgs: true, ByPeriod: time.Hour}}
}

// Unique jobs: an equal job in one of the states returns the first's id
// as a duplicate; equality is by kind and by the args (all, or the
// tagged fields), queue and period as asked.
func TestUniqueJobs(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		clk := clocktest.New()
		c := clientOf(t, st, leasehold.Config{Clock: clk})
		enqueue := func(args leasehold.JobArgs, opts *leasehold.EnqueueOptions) *leasehold.EnqueueResult {
			t.Helper()
			res, err := c.Enqueue(ctx, args, opts)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		byArgs := &leasehold.EnqueueOptions{Unique: &leasehold.UniqueOpts{ByArgs: true}}
		first := enqueue(invoice{Customer: "ann", Month: "2026-11", Note: "first"}, byArgs)
		if again := enqueue(invoice{Customer: "ann", Month: "2026-11", Note: "a different note"}, byArgs); !again.Duplicate || again.ID != first.ID {
			t.Fatalf("an invoice equal by its tagged fields = %+v, want a duplicate of %d", again, first.ID)
		}
		if other := enqueue(invoice{Customer: "bob", Month: "2026-11"}, byArgs); other.Duplicate {
			t.Fatalf("another customer's invoice = %+v, want a new job", other)
		}
		// Without ByQueue an equal job on another queue counts; with it,
		// not.
		if again := enqueue(invoice{Customer: "ann", Month: "2026-11"}, &leasehold.EnqueueOptions{Queue: "other", Unique: &leasehold.UniqueOpts{ByArgs: true}}); again.ID != first.ID {
			t.Fatalf("on another queue, without ByQueue: %+v, want a duplicate of %d", again, first.ID)
		}
		if again := enqueue(invoice{Customer: "ann", Month: "2026-11"}, &leasehold.EnqueueOptions{Queue: "other", Unique: &leasehold.UniqueOpts{ByArgs: true, ByQueue: true}}); again.Duplicate {
			t.Fatalf("on another queue, by queue: %+v, want a new job", again)
		}

		// A kind's options make it unique by args within the hour.
		if err := clk.SetWall(time.Date(2026, 11, 26, 10, 5, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		d1 := enqueue(digest{User: "ann"}, nil)
		clk.Advance(50 * time.Minute)
		if again := enqueue(digest{User: "ann"}, nil); again.ID != d1.ID {
			t.Fatalf("a digest in the same hour = %+v, want a duplicate of %d", again, d1.ID)
		}
		clk.Advance(10 * time.Minute)
		if next := enqueue(digest{User: "ann"}, nil); next.Duplicate {
			t.Fatalf("a digest in the next hour = %+v, want a new job", next)
		}

		// By state: only while the first is pending.
		pendingOnly := &leasehold.EnqueueOptions{Queue: "states", Unique: &leasehold.UniqueOpts{ByArgs: true, ByState: []leasehold.JobState{leasehold.JobStatePending}}}
		p1 := enqueue(invoice{Customer: "cy"}, pendingOnly)
		ds, err := st.Claim(ctx, store.Claim{Queue: "states", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
		if err != nil || len(ds) != 1 || ds[0].MessageID != p1.ID {
			t.Fatalf("Claim = %+v, %v", ds, err)
		}
		if next := enqueue(invoice{Customer: "cy"}, pendingOnly); next.Duplicate {
			t.Fatalf("while the first runs, unique only while pending: %+v, want a new job", next)
		}

		if _, err := c.Enqueue(ctx, invoice{}, &leasehold.EnqueueOptions{Unique: &leasehold.UniqueOpts{ByPeriod: -time.Second}}); err == nil {
			t.Fatal("a negative ByPeriod was accepted")
		}
	})
}

// Equal unique jobs enqueued at once make one job.
func TestUniqueJobsConcurrently(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		c := clientOf(t, st, leasehold.Config{})
		const n = 8
		ids := make([]int64, n)
		errs := make([]error, n)
		fresh := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res, err := c.Enqueue(context.Background(), invoice{Customer: "dee"}, &leasehold.EnqueueOptions{Unique: &leasehold.UniqueOpts{ByArgs: true}})
				errs[i] = err
				if err == nil {
					ids[i], fresh[i] = res.ID, !res.Duplicate
				}
			})
		}
		wg.Wait()
		made := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("equal unique jobs at once got ids %v, want one", ids)
			}
			if fresh[i] {
				made++
			}
		}
		if made != 1 {
			t.Fatalf("%d of %d enqueues made a job, want 1", made, n)
		}
	})
}
