package maintenance_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/store"
)

// Every Maintenance that always reaps does; only the one that holds the
// maintainer lease cleans, and when it stops another takes over.
func TestMaintenance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newStore(t, nil)
		start := func(id string) (*maintenance.Maintenance, chan error) {
			m, err := maintenance.New(maintenance.Config{Deps: deps(st, nil), ID: id, LeaseDuration: 3 * time.Second,
				ReapInterval: time.Second, AlwaysReap: true, Retention: &maintenance.Retention{Completed: time.Hour, Dead: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			synctest.Wait()
			return m, done
		}
		a, aDone := start("a")
		b, bDone := start("b")
		if !a.Maintaining() || b.Maintaining() {
			t.Fatalf("maintaining: a %v, b %v; want a only", a.Maintaining(), b.Maintaining())
		}

		// A lease that ends comes back within the reap interval.
		if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "q"}}); err != nil {
			t.Fatal(err)
		}
		if ds, err := st.Claim(ctx, store.Claim{Queue: "q", WorkerID: "gone", Max: 1, LeaseDuration: 2 * time.Second}); err != nil || len(ds) != 1 {
			t.Fatalf("claim = %v, %v", ds, err)
		}
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		if s, _ := st.Stats(ctx, "q"); s.Pending != 1 || s.Processing != 0 {
			t.Fatalf("after the lease ended: %+v, want it pending again", s)
		}

		// A completed message goes once its retention and the dedup window
		// have passed.
		ds, err := st.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim = %v, %v", ds, err)
		}
		if _, err := st.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour + 2*time.Minute)
		synctest.Wait()
		if s, _ := st.Stats(ctx, "q"); s.Completed != 0 {
			t.Fatalf("after the retention: %+v, want the completed message deleted", s)
		}

		if err := a.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-aDone; err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second + 10*time.Millisecond)
		synctest.Wait()
		if !b.Maintaining() {
			t.Fatal("b does not maintain once a stopped")
		}
		if err := b.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		<-bDone
	})
}

// The maintainer deletes the throughput minutes past ThroughputKept,
// though it has no cleaner: the minutes of the last day stay.
func TestMaintenancePrunesThroughput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newStore(t, nil)
		m, err := maintenance.New(maintenance.Config{Deps: deps(st, nil), ID: "a", LeaseDuration: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "q"}}); err != nil {
			t.Fatal(err)
		}
		ds, err := st.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim = %v, %v", ds, err)
		}
		if _, err := st.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil {
			t.Fatal(err)
		}
		since := time.Now().Add(-time.Hour)
		minutes := func() int {
			t.Helper()
			ms, err := st.Throughput(ctx, "q", since)
			if err != nil {
				t.Fatal(err)
			}
			return len(ms)
		}
		time.Sleep(store.ThroughputWindow)
		synctest.Wait()
		if n := minutes(); n != 1 {
			t.Fatalf("a day on, the queue has %d minutes, want its one kept", n)
		}
		time.Sleep(maintenance.ThroughputKept - store.ThroughputWindow + 2*maintenance.CleanInterval)
		synctest.Wait()
		if n := minutes(); n != 0 {
			t.Fatalf("past ThroughputKept, the queue has %d minutes, want none", n)
		}
		if err := m.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		<-done
	})
}
