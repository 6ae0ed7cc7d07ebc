package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// Dead and cancelled messages are pruned by the age of their end, one
// queue or every queue, a batch at a time; a pruned message's dedup id is
// forgotten.
func testPruneDeadAndCancelled(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.enqueue(
		store.NewMessage{MaxDeliveries: 1, DedupID: "again"},
		store.NewMessage{MaxDeliveries: 1},
		store.NewMessage{},
		store.NewMessage{Queue: "other", MaxDeliveries: 1},
	)
	for _, d := range b.claim(2) {
		if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "no", Permanent: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.s.Cancel(b.ctx, b.queue, []int64{ids[2]}); err != nil {
		t.Fatal(err)
	}
	ds, err := b.s.Claim(b.ctx, store.Claim{Queue: "other", WorkerID: "w", Max: 1, LeaseDuration: lease})
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim of other: %v, %v", ds, err)
	}
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[0].Lease, Error: "no", Permanent: true}); err != nil {
		t.Fatal(err)
	}

	// Inside the dedup window nothing goes, whatever the age asked for.
	if n, err := b.prune(store.Dead, 0, 100); err != nil || n != 0 {
		t.Fatalf("Prune inside the dedup window = %d, %v", n, err)
	}
	b.clk.Advance(store.DefaultDedupWindow)
	if n, err := b.prune(store.Dead, time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("Prune of dead messages younger than asked = %d, %v", n, err)
	}
	if n, err := b.prune(store.Dead, time.Minute, 1); err != nil || n != 1 {
		t.Fatalf("Prune of one dead message = %d, %v", n, err)
	}
	if n, err := b.prune(store.Dead, time.Minute, 100); err != nil || n != 1 {
		t.Fatalf("Prune of the queue's other dead message = %d, %v", n, err)
	}
	if n, err := b.prune(store.Cancelled, time.Minute, 100); err != nil || n != 1 {
		t.Fatalf("Prune of the cancelled message = %d, %v", n, err)
	}
	if st := b.stats(); st.Dead != 0 || st.Cancelled != 0 {
		t.Fatalf("stats after pruning: %+v", st)
	}
	if st, err := b.s.Stats(b.ctx, "other"); err != nil || st.Dead != 1 {
		t.Fatalf("another queue's dead message was pruned: %+v, %v", st, err)
	}
	if n, err := b.s.Prune(b.ctx, store.Prune{State: store.Dead, OlderThan: time.Minute, Limit: 100}); err != nil || n != 1 {
		t.Fatalf("Prune of every queue = %d, %v", n, err)
	}
	// The dedup id of a pruned message is free again.
	res, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, DedupID: "again"}})
	if err != nil || res[0].Duplicate || res[0].ID == ids[0] {
		t.Fatalf("enqueue with a pruned message's dedup id: %+v, %v; want a new message", res, err)
	}
}

func testRetention(t *testing.T, f Factory) {
	b := setup(t, f)
	for i := 0; i < 5; i++ {
		b.enqueue(store.NewMessage{Payload: []byte("x"), DedupID: fmt.Sprint("d", i)})
	}
	for _, d := range b.claim(5) {
		b.mustComplete(d.Lease)
	}
	if n, err := b.prune(store.Completed, time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("Prune inside retention = %d, %v", n, err)
	}
	// Past the retention but inside the dedup window: kept, to dedup.
	b.clk.Advance(store.DefaultDedupWindow - time.Second)
	if n, err := b.prune(store.Completed, time.Second, 100); err != nil || n != 0 {
		t.Fatalf("Prune inside the dedup window = %d, %v", n, err)
	}
	b.clk.Advance(time.Second)
	var total int
	for {
		n, err := b.prune(store.Completed, time.Second, 2)
		if err != nil {
			t.Fatal(err)
		}
		if n > 2 {
			t.Fatalf("deleted %d in a batch of 2", n)
		}
		total += n
		if n < 2 {
			break
		}
	}
	if total != 5 {
		t.Fatalf("deleted %d, want 5", total)
	}
	if st := b.stats(); st.Completed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: store.Completed}); err != nil || len(infos) != 0 {
		t.Fatalf("completed messages listed after retention: %d, %v", len(infos), err)
	}
}

// prune prunes the suite's queue.
func (b *bundle) prune(state store.State, olderThan time.Duration, limit int) (int, error) {
	return b.s.Prune(b.ctx, store.Prune{Queue: b.queue, State: state, OlderThan: olderThan, Limit: limit})
}
