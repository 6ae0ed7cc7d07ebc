package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/store"
)

func testQueues(t *testing.T, f Factory) {
	b := setup(t, f)
	if qs, err := b.s.Queues(b.ctx); err != nil || len(qs) != 0 {
		t.Fatalf("Queues of an empty store = %v, %v", qs, err)
	}
	b.enqueue(store.NewMessage{Queue: "b"}, store.NewMessage{Queue: "a"}, store.NewMessage{Queue: "b"})
	qs, err := b.s.Queues(b.ctx)
	if err != nil || !slices.Equal(qs, []string{"a", "b"}) {
		t.Fatalf("Queues = %v, %v; want [a b]", qs, err)
	}
	// A paused queue is listed while it is paused, messages or not.
	if err := b.s.Pause(b.ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if qs, err := b.s.Queues(b.ctx); err != nil || !slices.Equal(qs, []string{"a", "b", "c"}) {
		t.Fatalf("Queues with c paused = %v, %v; want [a b c]", qs, err)
	}
	if err := b.s.Resume(b.ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if qs, err := b.s.Queues(b.ctx); err != nil || !slices.Equal(qs, []string{"a", "b"}) {
		t.Fatalf("Queues with c resumed = %v, %v; want [a b]", qs, err)
	}
}

func testDeleteQueue(t *testing.T, f Factory) {
	b := setup(t, f)
	b.enqueue(store.NewMessage{Key: "k"}, store.NewMessage{Key: "k"}, store.NewMessage{DedupID: "d"}, store.NewMessage{Queue: "other"})
	ds := b.claim(1)
	if len(ds) != 1 {
		t.Fatalf("claimed %d", len(ds))
	}
	if err := b.s.Pause(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	n, err := b.s.DeleteQueue(b.ctx, b.queue)
	if err != nil || n != 3 {
		t.Fatalf("DeleteQueue = %d, %v; want 3", n, err)
	}
	if st, err := b.s.Stats(b.ctx, b.queue); err != nil || st != (store.Stats{Queue: b.queue}) {
		t.Fatalf("stats after DeleteQueue: %+v, %v", st, err)
	}
	if st, _ := b.s.Stats(b.ctx, "other"); st.Pending != 1 {
		t.Fatalf("another queue lost messages: %+v", st)
	}
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: ds[0].Lease}})
	if err != nil || !errors.Is(errs[0], store.ErrLeaseLost) {
		t.Fatalf("completing a deleted message: %v, %v; want ErrLeaseLost", errs, err)
	}
	// The queue works again, dedup ids and keys forgotten.
	b.enqueue(store.NewMessage{Key: "k"}, store.NewMessage{DedupID: "d"})
	if got := b.claim(10); len(got) != 2 {
		t.Fatalf("claimed %d after re-enqueueing, want 2", len(got))
	}
	if _, err := b.s.DeleteQueue(b.ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("DeleteQueue of an empty name: %v", err)
	}
}
