package maintenance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/store"
)

// The cleaner deletes completed messages after their retention and dead
// and cancelled ones after theirs, all of them however many batches that
// takes; KeepForever keeps a state.
func TestCleanerDeletesPastRetention(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New()
	st := newStore(t, clk)
	msgs := make([]store.NewMessage, maintenance.CleanBatch+5)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: "q", MaxDeliveries: 1}
	}
	if _, err := st.Enqueue(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	ds, err := st.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: len(msgs), LeaseDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]store.Completion, 0, len(ds))
	for _, d := range ds[2:] {
		cs = append(cs, store.Completion{Lease: d.Lease})
	}
	if _, err := st.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Fail(ctx, store.Failure{Lease: ds[0].Lease, Error: "x", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, "q", []int64{ds[1].MessageID}); err != nil {
		t.Fatal(err)
	}
	keepDead, err := maintenance.NewCleaner(maintenance.CleanerConfig{Deps: deps(st, clk),
		Retention: maintenance.Retention{Completed: maintenance.DefaultCompletedRetention, Dead: maintenance.KeepForever}})
	if err != nil {
		t.Fatal(err)
	}
	cleaner, err := maintenance.NewCleaner(maintenance.CleanerConfig{Deps: deps(st, clk),
		Retention: maintenance.Retention{Completed: maintenance.DefaultCompletedRetention, Dead: maintenance.DefaultDeadRetention}})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(maintenance.DefaultCompletedRetention - time.Minute)
	if got, err := cleaner.RunOnce(ctx); err != nil || got != (maintenance.Cleaned{}) {
		t.Fatalf("inside every retention: %+v, %v; want nothing deleted", got, err)
	}
	clk.Advance(time.Minute)
	if got, err := keepDead.RunOnce(ctx); err != nil || got != (maintenance.Cleaned{Completed: len(cs)}) {
		t.Fatalf("after the completed retention: %+v, %v; want %d completed deleted", got, err, len(cs))
	}
	clk.Advance(maintenance.DefaultDeadRetention)
	if got, err := keepDead.RunOnce(ctx); err != nil || got != (maintenance.Cleaned{}) {
		t.Fatalf("KeepForever deleted %+v, %v", got, err)
	}
	if got, err := cleaner.RunOnce(ctx); err != nil || got != (maintenance.Cleaned{Dead: 1, Cancelled: 1}) {
		t.Fatalf("after the dead retention: %+v, %v; want the dead and the cancelled one deleted", got, err)
	}
	if s, _ := st.Stats(ctx, "q"); s != (store.Stats{Queue: "q"}) {
		t.Fatalf("stats after cleaning: %+v", s)
	}
}

// A retention is positive or KeepForever; the check names each other one
// by its setting.
func TestRetentionCheck(t *testing.T) {
	if err := (maintenance.Retention{Completed: time.Hour, Dead: maintenance.KeepForever}).Check(); err != nil {
		t.Fatalf("good retentions refused: %v", err)
	}
	err := maintenance.Retention{Completed: -time.Hour, Dead: 0}.Check()
	if err == nil || !strings.Contains(err.Error(), "CompletedRetention is -1h0m0s") || !strings.Contains(err.Error(), "DeadRetention is 0s") {
		t.Fatalf("Check = %v, want both retentions named", err)
	}
}
