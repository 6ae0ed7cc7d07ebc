package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// CheckUpgraded checks a store opened on a database that the previous
// schema version wrote, holding in queue a two completed messages and one
// pending, and in queue b one completed: the counts survive the upgrade,
// stay right as messages complete and queues go, and new messages carry a
// kind.
func CheckUpgraded(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	want := func(queue string, completed, pending int64) {
		t.Helper()
		st, err := s.Stats(ctx, queue)
		if err != nil || st.Completed != completed || st.Pending != pending {
			t.Fatalf("stats of %s: %+v, %v; want %d completed, %d pending", queue, st, err, completed, pending)
		}
	}
	want("a", 2, 1)
	want("b", 1, 0)
	ds, err := s.Claim(ctx, store.Claim{Queue: "a", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %v, %v", ds, err)
	}
	if errs, err := s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil || errs[0] != nil {
		t.Fatalf("complete: %v, %v", errs, err)
	}
	want("a", 3, 0)
	// Messages written after the upgrade carry a kind.
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "a", Kind: "send_email"}}); err != nil {
		t.Fatal(err)
	}
	if infos, err := s.List(ctx, store.ListFilter{Queue: "a", State: store.Pending}); err != nil || len(infos) != 1 || infos[0].Kind != "send_email" {
		t.Fatalf("after the upgrade: %+v, %v", infos, err)
	}
	if _, err := s.DeleteQueue(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	want("a", 0, 0)
	want("b", 1, 0)
	// A queue can be paused after the upgrade.
	if err := s.Pause(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx, "b"); err != nil || !st.Paused {
		t.Fatalf("stats of a paused queue after the upgrade: %+v, %v", st, err)
	}
	// And a message written before it can be cancelled.
	infos, err := s.List(ctx, store.ListFilter{Queue: "b", State: store.Completed})
	if err != nil || len(infos) != 1 {
		t.Fatalf("list of b: %v, %v", infos, err)
	}
	if ids, err := s.Cancel(ctx, "b", []int64{infos[0].ID}); err != nil || len(ids) != 0 {
		t.Fatalf("cancel of a completed message after the upgrade: %v, %v; want nothing cancelled", ids, err)
	}
	res, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Cancel(ctx, "b", []int64{res[0].ID}); err != nil || len(ids) != 1 {
		t.Fatalf("cancel after the upgrade: %v, %v", ids, err)
	}
	if st, err := s.Stats(ctx, "b"); err != nil || st.Cancelled != 1 {
		t.Fatalf("stats after a cancel after the upgrade: %+v, %v", st, err)
	}
	// A message written before it has no attributes and was never claimed
	// since; one written after carries attributes and its first claim.
	if infos[0].Attributes != nil || !infos[0].FirstClaimedAt.IsZero() {
		t.Fatalf("a message written before the upgrade: %+v; want no attributes, no first claim", infos[0])
	}
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "c", Attributes: []byte("attrs")}}); err != nil {
		t.Fatal(err)
	}
	ds, err = s.Claim(ctx, store.Claim{Queue: "c", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 || string(ds[0].Attributes) != "attrs" || ds[0].FirstClaimedAt.IsZero() {
		t.Fatalf("claim after the upgrade: %+v, %v; want the attributes and the first claim's time", ds, err)
	}
	// The paused queue b, which has a row of settings, takes a record, and
	// the queue that only held messages has none.
	info, made, err := s.CreateQueue(ctx, "b", map[string]string{"A": "1"})
	if err != nil || !made || !info.Paused || info.Attributes["A"] != "1" {
		t.Fatalf("CreateQueue of a queue paused before the upgrade's record: %+v, %v, %v", info, made, err)
	}
	if _, err := s.QueueInfo(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo of a queue never created, after the upgrade: %v, want ErrNotFound", err)
	}
}
