package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// A queue's throughput counts, per minute of the store's clock, its
// completions (a repeated late completion once), its failed deliveries
// that will be retried (failures, counted releases, expired leases) and
// its dead letters (counted in the queue they died in, whether they
// stayed or moved to a dead-letter queue); an uncounted release counts
// nothing. Each queue has its own; since selects the minutes; a minute
// with nothing counted is left out; PruneThroughput deletes the minutes
// past its age, which is never under a day.
func testThroughput(t *testing.T, f Factory) {
	b := setup(t, f)
	ctx := b.ctx
	start := b.clk.Now()
	if ms := b.throughput(b.queue, start.Add(-store.ThroughputWindow)); len(ms) != 0 {
		t.Fatalf("Throughput of a new queue = %+v, want none", ms)
	}
	if _, _, err := b.s.CreateQueue(ctx, "dlq", nil); err != nil {
		t.Fatal(err)
	}
	first := start.Truncate(time.Minute)

	// The first minute: two completions (one completed late twice), a
	// failure that retries and an uncounted release.
	b.enqueue(make([]store.NewMessage, 4)...)
	ds := b.claim(4)
	if len(ds) != 4 {
		t.Fatalf("claimed %d, want 4", len(ds))
	}
	b.mustComplete(ds[0].Lease)
	for range 2 {
		res, err := b.s.Complete(ctx, []store.Completion{{Lease: ds[1].Lease, Late: true}})
		if err != nil || res[0] != nil {
			t.Fatalf("late Complete = %v, %v", res, err)
		}
	}
	if _, err := b.s.Fail(ctx, store.Failure{Lease: ds[2].Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Release(ctx, store.Release{Lease: ds[3].Lease, Uncount: true}); err != nil {
		t.Fatal(err)
	}

	// The next minute: a permanent failure, a dead letter that moves to
	// its dead-letter queue, a counted release, an expired lease, and a
	// completion in another queue.
	b.clk.Advance(time.Minute)
	ds = b.claim(2)
	if _, err := b.s.Fail(ctx, store.Failure{Lease: ds[0].Lease, Error: "bad", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	b.enqueue(store.NewMessage{Payload: []byte("moves"), DeadLetterQueue: "dlq"}, store.NewMessage{Queue: "other"})
	moving := b.claimOne()
	if _, err := b.s.Fail(ctx, store.Failure{Lease: moving.Lease, Error: "gone", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Release(ctx, store.Release{Lease: ds[1].Lease}); err != nil {
		t.Fatal(err)
	}
	b.claimFor(1, time.Second) // the released message, its lease soon over
	b.clk.Advance(2 * time.Second)
	if rs := b.reap(); len(rs) != 1 || rs[0].Dead {
		t.Fatalf("Reap = %+v, want one message back", rs)
	}
	od, err := b.s.Claim(ctx, store.Claim{Queue: "other", WorkerID: "w1", Max: 1, LeaseDuration: lease})
	if err != nil || len(od) != 1 {
		t.Fatalf("Claim(other) = %d, %v", len(od), err)
	}
	b.mustComplete(od[0].Lease)

	second := first.Add(time.Minute)
	want := []store.Minute{{At: first, Completed: 2, Failed: 1}, {At: second, Failed: 2, Dead: 2}}
	if got := b.throughput(b.queue, start.Add(-time.Hour)); !slices.Equal(got, want) {
		t.Fatalf("Throughput = %+v, want %+v", got, want)
	}
	if got := b.throughput(b.queue, second.Add(30*time.Second)); !slices.Equal(got, want[1:]) {
		t.Fatalf("Throughput from within the second minute = %+v, want %+v", got, want[1:])
	}
	if got, want := b.throughput("other", first), []store.Minute{{At: second, Completed: 1}}; !slices.Equal(got, want) {
		t.Fatalf("Throughput(other) = %+v, want %+v", got, want)
	}
	if got := b.throughput("dlq", first); len(got) != 0 {
		t.Fatalf("Throughput(dlq) = %+v, want none: a dead letter counts where it died", got)
	}

	// Pruning: never within a day; past it, the old minutes go and the
	// new stay.
	if _, err := b.s.PruneThroughput(ctx, store.ThroughputWindow-time.Minute); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("PruneThroughput under a day: %v, want ErrInvalid", err)
	}
	if _, err := b.s.Throughput(ctx, "", first); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Throughput of no queue: %v, want ErrInvalid", err)
	}
	b.clk.Advance(store.ThroughputWindow - 30*time.Second)
	if n, err := b.s.PruneThroughput(ctx, store.ThroughputWindow); err != nil || n == 0 {
		t.Fatalf("PruneThroughput a day on = %d, %v; want the first minute's rows", n, err)
	}
	if got := b.throughput(b.queue, start.Add(-time.Hour)); !slices.Equal(got, want[1:]) {
		t.Fatalf("Throughput after pruning the first minute = %+v, want %+v", got, want[1:])
	}
	b.clk.Advance(2 * time.Minute)
	d := b.claimOne()
	b.mustComplete(d.Lease)
	if n, err := b.s.PruneThroughput(ctx, store.ThroughputWindow); err != nil || n == 0 {
		t.Fatalf("PruneThroughput = %d, %v; want the second minute's rows", n, err)
	}
	now := b.clk.Now().Truncate(time.Minute)
	if got, want := b.throughput(b.queue, start), []store.Minute{{At: now, Completed: 1}}; !slices.Equal(got, want) {
		t.Fatalf("Throughput after pruning = %+v, want %+v", got, want)
	}
}

func (b *bundle) throughput(queue string, since time.Time) []store.Minute {
	b.t.Helper()
	ms, err := b.s.Throughput(b.ctx, queue, since)
	if err != nil {
		b.t.Fatalf("Throughput(%s): %v", queue, err)
	}
	return ms
}
