package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// A cancelled message never runs: pending or waiting, it is not claimed;
// processing, its lease is lost at once, reported as cancelled, and the
// reaper does not bring it back. A key's next message goes on. Finished
// messages stay as they were; an unknown id changes nothing.
func testCancel(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.enqueue(
		store.NewMessage{Payload: []byte("pending")},
		store.NewMessage{Key: "k", Payload: []byte("head")},
		store.NewMessage{Key: "k", Payload: []byte("behind the head")},
		store.NewMessage{Key: "k", Payload: []byte("last of k")},
		store.NewMessage{Payload: []byte("processing")},
		store.NewMessage{Payload: []byte("completed")},
	)
	pending, head, behind, last, processing, completed := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]
	ds := b.claim(10) // pending, head, processing and completed
	if len(ds) != 4 {
		t.Fatalf("claimed %d, want 4", len(ds))
	}
	leases := map[int64]store.Lease{}
	for _, d := range ds {
		leases[d.MessageID] = d.Lease
	}
	b.mustComplete(leases[completed])
	if err := b.s.Release(b.ctx, store.Release{Lease: leases[pending], Uncount: true}); err != nil {
		t.Fatal(err)
	}

	// An unknown id, or one of another queue, changes nothing.
	for _, bad := range []struct {
		queue string
		ids   []int64
	}{{b.queue, []int64{pending, 987654}}, {"other", []int64{pending}}} {
		if _, err := b.s.Cancel(b.ctx, bad.queue, bad.ids); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Cancel(%q, %v) = %v, want ErrNotFound", bad.queue, bad.ids, err)
		}
	}
	b.wantState(pending, store.Pending)
	if _, err := b.s.Cancel(b.ctx, b.queue, nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Cancel of no ids: %v, want ErrInvalid", err)
	}

	got, err := b.s.Cancel(b.ctx, b.queue, []int64{completed, pending, behind, processing, head})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{pending, behind, processing, head}; !slices.Equal(got, want) {
		t.Fatalf("Cancel returned %v, want %v (the completed one is left as it was)", got, want)
	}
	b.wantState(completed, store.Completed)
	for _, id := range got {
		if in := b.wantState(id, store.Cancelled); in.FinishedAt.IsZero() {
			t.Fatalf("cancelled message %d has no finish time", id)
		}
	}

	// The holders of the cancelled leases learn it, and cannot settle them.
	res, err := b.s.Extend(b.ctx, []store.Lease{leases[processing], leases[head]}, lease)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Lost) != 2 || len(res.Cancelled) != 2 {
		t.Fatalf("Extend of cancelled leases: %+v, want both lost and cancelled", res)
	}
	if err := b.complete(leases[processing]); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("completing a cancelled message: %v, want ErrLeaseLost", err)
	}
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: leases[head], Error: "x"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("failing a cancelled message: %v, want ErrLeaseLost", err)
	}

	// The key's last message is its head now; nothing else runs.
	if d := b.claimOne(); d.MessageID != last {
		t.Fatalf("claimed %d, want %d, the key's message after the cancelled ones", d.MessageID, last)
	}
	b.clk.Advance(time.Hour)
	if rec := b.reap(); len(rec) != 1 || rec[0].ID != last {
		t.Fatalf("the reaper took back %+v, want only %d", rec, last)
	}
	st := b.stats()
	if st.Cancelled != 4 || st.Pending != 1 || st.Waiting != 0 || st.Processing != 0 || st.Completed != 1 {
		t.Fatalf("stats %+v, want 4 cancelled, 1 pending, 1 completed", st)
	}
	infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: store.Cancelled})
	if err != nil || len(infos) != 4 {
		t.Fatalf("List of cancelled: %d, %v; want 4", len(infos), err)
	}

	// Any queue: an empty queue name; a finished message again.
	other := b.enqueue(store.NewMessage{Queue: "other"})[0]
	if got, err := b.s.Cancel(b.ctx, "", []int64{other, pending}); err != nil || !slices.Equal(got, []int64{other}) {
		t.Fatalf("Cancel in any queue = %v, %v; want [%d]", got, err, other)
	}
}
