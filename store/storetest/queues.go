package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

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

// AllStats counts every queue as Stats counts each, for the queues that
// Queues lists: with messages in each state, paused, or only recorded.
func testAllStats(t *testing.T, f Factory) {
	b := setup(t, f)
	if all, err := b.s.AllStats(b.ctx); err != nil || len(all) != 0 {
		t.Fatalf("AllStats of an empty store = %v, %v", all, err)
	}
	b.enqueue(store.NewMessage{Queue: "a", Key: "k"}, store.NewMessage{Queue: "a", Key: "k"}, store.NewMessage{Queue: "a", Key: "k"},
		store.NewMessage{Queue: "a"}, store.NewMessage{Queue: "a", Delay: time.Minute}, store.NewMessage{Queue: "a", Priority: 3},
		store.NewMessage{Queue: "b"}, store.NewMessage{Queue: "b"}, store.NewMessage{Queue: "b"}, store.NewMessage{Queue: "b"})
	b.clk.Advance(time.Second)
	b.enqueue(store.NewMessage{Queue: "a", Priority: -2})
	b.clk.Advance(time.Second)
	// b: one completed, one dead, one cancelled, one processing.
	ds, err := b.s.Claim(b.ctx, store.Claim{Queue: "b", WorkerID: "w", Max: 3, LeaseDuration: lease})
	if err != nil || len(ds) != 3 {
		t.Fatalf("Claim = %d, %v", len(ds), err)
	}
	if _, err := b.s.Complete(b.ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[1].Lease, Permanent: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Cancel(b.ctx, "b", []int64{ds[2].MessageID}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Claim(b.ctx, store.Claim{Queue: "b", WorkerID: "w", Max: 1, LeaseDuration: lease}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Pause(b.ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.s.CreateQueue(b.ctx, "d", nil); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(5 * time.Second)
	all, err := b.s.AllStats(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	names, err := b.s.Queues(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(names) {
		t.Fatalf("AllStats has %d queues, Queues %d: %+v, %v", len(all), len(names), all, names)
	}
	for i, q := range names {
		want, err := b.s.Stats(b.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if all[i] != want {
			t.Errorf("AllStats of %s = %+v, Stats %+v", q, all[i], want)
		}
	}
	if !slices.Equal(names, []string{"a", "b", "c", "d"}) {
		t.Errorf("queues = %v, want [a b c d]", names)
	}
	if all[0].Waiting != 2 || all[0].BlockedKeys != 1 || all[0].Delayed != 1 || all[0].OldestPendingAge != 7*time.Second {
		t.Errorf("a's counts = %+v", all[0])
	}
	if s := all[1]; s.Completed != 1 || s.Dead != 1 || s.Cancelled != 1 || s.Processing != 1 {
		t.Errorf("b's counts = %+v", s)
	}
	if !all[2].Paused {
		t.Errorf("c is not paused: %+v", all[2])
	}
}

// QueuePage pages through the queues that Queues lists, forward and
// back, whatever makes a queue one: messages in any state, a pause, a
// record.
func testQueuePage(t *testing.T, f Factory) {
	b := setup(t, f)
	if page, err := b.s.QueuePage(b.ctx, "", "", 10); err != nil || len(page) != 0 {
		t.Fatalf("QueuePage of an empty store = %v, %v", page, err)
	}
	// a0 holds a pending message, a1 a key's head and one waiting behind
	// it, a2 a processing one, a3 a completed one, a4 a dead one, a5 a
	// cancelled one; a6 is paused and a7 recorded.
	b.enqueue(store.NewMessage{Queue: "a0"}, store.NewMessage{Queue: "a1", Key: "k"}, store.NewMessage{Queue: "a1", Key: "k"},
		store.NewMessage{Queue: "a2"}, store.NewMessage{Queue: "a3"}, store.NewMessage{Queue: "a4"}, store.NewMessage{Queue: "a5"})
	claim := func(q string) store.Delivery {
		ds, err := b.s.Claim(b.ctx, store.Claim{Queue: q, WorkerID: "w", Max: 1, LeaseDuration: lease})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Claim %s = %d, %v", q, len(ds), err)
		}
		return ds[0]
	}
	claim("a2") // processing
	if _, err := b.s.Complete(b.ctx, []store.Completion{{Lease: claim("a3").Lease}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: claim("a4").Lease, Permanent: true}); err != nil {
		t.Fatal(err)
	}
	infos, err := b.s.List(b.ctx, store.ListFilter{Queue: "a5", State: store.Pending})
	if err != nil || len(infos) != 1 {
		t.Fatalf("List a5 = %v, %v", infos, err)
	}
	if _, err := b.s.Cancel(b.ctx, "a5", []int64{infos[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Pause(b.ctx, "a6"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.s.CreateQueue(b.ctx, "a7", nil); err != nil {
		t.Fatal(err)
	}
	all, err := b.s.Queues(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"}; !slices.Equal(all, want) {
		t.Fatalf("Queues = %v, want %v", all, want)
	}
	for _, limit := range []int{1, 2, 3, 8, 100} {
		var fwd []string
		after := ""
		for {
			page, err := b.s.QueuePage(b.ctx, after, "", limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit {
				t.Fatalf("a page of limit %d has %d queues", limit, len(page))
			}
			fwd = append(fwd, page...)
			if len(page) < limit {
				break
			}
			after = page[len(page)-1]
		}
		if !slices.Equal(fwd, all) {
			t.Fatalf("forward by %d: %v, want %v", limit, fwd, all)
		}
		var back []string
		before := "b"
		for {
			page, err := b.s.QueuePage(b.ctx, "", before, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			if len(page) > limit {
				t.Fatalf("a page of limit %d has %d queues", limit, len(page))
			}
			back = append(slices.Clone(page), back...)
			before = page[0]
		}
		if !slices.Equal(back, all) {
			t.Fatalf("backward by %d: %v, want %v", limit, back, all)
		}
	}
	if page, err := b.s.QueuePage(b.ctx, "a3", "", 2); err != nil || !slices.Equal(page, []string{"a4", "a5"}) {
		t.Fatalf("QueuePage after a3 = %v, %v; want [a4 a5]", page, err)
	}
	if page, err := b.s.QueuePage(b.ctx, "", "a3", 2); err != nil || !slices.Equal(page, []string{"a1", "a2"}) {
		t.Fatalf("QueuePage before a3 = %v, %v; want [a1 a2]", page, err)
	}
	for _, c := range []struct {
		after, before string
		limit         int
	}{{"", "", 0}, {"", "", store.MaxBatch + 1}, {"a", "b", 10}} {
		if _, err := b.s.QueuePage(b.ctx, c.after, c.before, c.limit); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("QueuePage(%q, %q, %d) = %v, want ErrInvalid", c.after, c.before, c.limit, err)
		}
	}
}
