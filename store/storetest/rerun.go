package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// finishedThree makes a completed, a dead and a cancelled message, in that
// order, and returns their ids and the lease that completed the first.
func (b *bundle) finishedThree() (completed, dead, cancelled int64, completedBy store.Lease) {
	b.t.Helper()
	completed = b.send("completed")
	completedBy = b.claimOne().Lease
	b.mustComplete(completedBy)
	dead = b.send("dead")
	d := b.claimOne()
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "boom", Permanent: true}); err != nil {
		b.t.Fatal(err)
	}
	cancelled = b.send("cancelled")
	if _, err := b.s.Cancel(b.ctx, "", []int64{cancelled}); err != nil {
		b.t.Fatal(err)
	}
	return completed, dead, cancelled, completedBy
}

// refusedByID checks that op (Rerun or Delete) refuses a batch with a
// processing message, one with an unknown id, and none; the caller then
// checks that nothing changed.
func (b *bundle) refusedByID(op string, fn func(context.Context, []int64) error, finished, processing int64) {
	b.t.Helper()
	for _, bad := range []struct {
		ids  []int64
		want error
	}{{[]int64{finished, processing}, store.ErrProcessing}, {[]int64{finished, 987654}, store.ErrNotFound}, {nil, store.ErrInvalid}} {
		if err := fn(b.ctx, bad.ids); !errors.Is(err, bad.want) {
			b.t.Fatalf("%s(%v) = %v, want %v", op, bad.ids, err, bad.want)
		}
	}
}

// Rerun brings completed, dead and cancelled messages back, pending and
// visible now with a fresh budget, off the completed count, their error
// history kept and no earlier lease reaching them; it makes a delayed
// pending message visible now. A processing message or an unknown id
// refuses the call, which changes nothing.
func testRerun(t *testing.T, f Factory) {
	b := setup(t, f)
	completed, dead, cancelled, completedBy := b.finishedThree()
	delayed := b.enqueue(store.NewMessage{Payload: []byte("later"), Delay: time.Hour})[0]
	processing := b.send("processing")
	held := b.claimOne()

	b.refusedByID("Rerun", b.s.Rerun, completed, processing)
	b.wantState(completed, store.Completed)
	b.wantState(processing, store.Processing)
	if st := b.stats(); st.Completed != 1 || st.Dead != 1 || st.Cancelled != 1 {
		t.Fatalf("stats after refused reruns %+v, want 1 completed, 1 dead, 1 cancelled", st)
	}

	b.clk.Advance(time.Minute)
	if err := b.s.Rerun(b.ctx, []int64{completed, dead, cancelled, delayed}); err != nil {
		t.Fatal(err)
	}
	now := b.clk.Now()
	for _, id := range []int64{completed, dead, cancelled, delayed} {
		in := b.wantState(id, store.Pending)
		if in.Deliveries != 0 || !in.FinishedAt.IsZero() || in.DeadReason != "" || !in.VisibleAt.Equal(now) {
			t.Fatalf("rerun message %d: %+v, want no deliveries, finish or dead reason, visible at %v", id, in, now)
		}
	}
	if in, err := b.s.Get(b.ctx, dead); err != nil || len(in.Errors) != 1 || in.LastError != "boom" {
		t.Fatalf("rerun dead message: errors %+v, last error %q, %v; want its history kept", in.Errors, in.LastError, err)
	}
	if st := b.stats(); st.Completed != 0 || st.Dead != 0 || st.Cancelled != 0 || st.Pending != 4 || st.Processing != 1 || st.Delayed != 0 {
		t.Fatalf("stats after rerun %+v, want 4 pending and visible, 1 processing, none finished", st)
	}
	late := store.Completion{Lease: completedBy, Late: true}
	if res, err := b.s.Complete(b.ctx, []store.Completion{late}); err != nil || !errors.Is(res[0], store.ErrLeaseLost) {
		t.Fatalf("late completion by a lease from before the rerun: %v, %v; want ErrLeaseLost", res, err)
	}
	// A rerun completed message is no longer one that Prune deletes.
	b.clk.Advance(48 * time.Hour)
	if n, err := b.s.Prune(b.ctx, store.Prune{State: store.Completed, Limit: 10}); err != nil || n != 0 {
		t.Fatalf("Prune after rerun = %d, %v; want 0", n, err)
	}
	b.reap() // the processing message's lease expired meanwhile
	ds := b.claim(10)
	if len(ds) != 5 {
		t.Fatalf("claimed %v, want the four rerun messages and the reaped one", ids(ds))
	}
	for _, d := range ds {
		if d.MessageID != held.MessageID && d.Attempt != 1 {
			t.Fatalf("rerun message %d claimed as attempt %d, want 1", d.MessageID, d.Attempt)
		}
	}
}

// A rerun message of a key waits behind the key's unfinished head, back in
// its place in the key's line, and a waiting message is left as it is.
func testRerunKey(t *testing.T, f Factory) {
	b := setup(t, f)
	first := b.enqueue(store.NewMessage{Key: "k", Payload: []byte("first")})[0]
	b.mustComplete(b.claimOne().Lease)
	head := b.enqueue(store.NewMessage{Key: "k", Payload: []byte("head")})[0]
	running := b.claimOne()
	if running.MessageID != head {
		t.Fatalf("claimed %d, want the key's head %d", running.MessageID, head)
	}
	behind := b.enqueue(store.NewMessage{Key: "k", Payload: []byte("behind")})[0]
	if err := b.s.Rerun(b.ctx, []int64{first, behind}); err != nil {
		t.Fatal(err)
	}
	b.wantState(first, store.Waiting)
	b.wantState(behind, store.Waiting)
	b.claimNone()
	b.mustComplete(running.Lease)
	// The rerun message goes back to its place in its key's line, as a
	// redriven one does: ahead of the message enqueued after it.
	if next := b.claimOne(); next.MessageID != first {
		t.Fatalf("claimed %d after the head, want the rerun message %d, enqueued first", next.MessageID, first)
	} else {
		b.claimNone()
		b.mustComplete(next.Lease)
	}
	if last := b.claimOne(); last.MessageID != behind {
		t.Fatalf("claimed %d last, want %d", last.MessageID, behind)
	}
}

// Delete deletes messages in any state but processing, off the completed
// count; a deleted pending head lets its key's next message go. A
// processing message or an unknown id refuses the call, which changes
// nothing.
func testDelete(t *testing.T, f Factory) {
	b := setup(t, f)
	completed, dead, cancelled, _ := b.finishedThree()
	head := b.enqueue(store.NewMessage{Key: "k", Payload: []byte("head"), Delay: time.Hour})[0]
	behind := b.enqueue(store.NewMessage{Key: "k", Payload: []byte("behind")})[0]
	last := b.enqueue(store.NewMessage{Key: "k", Payload: []byte("last")})[0]
	processing := b.send("processing")
	held := b.claimOne()

	b.refusedByID("Delete", b.s.Delete, completed, processing)
	b.wantState(completed, store.Completed)
	if st := b.stats(); st.Completed != 1 || st.Processing != 1 || st.Pending != 1 || st.Waiting != 2 {
		t.Fatalf("stats after refused deletes %+v", st)
	}

	if err := b.s.Delete(b.ctx, []int64{completed, dead, cancelled, head, last}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{completed, dead, cancelled, head, last} {
		if _, err := b.s.Get(b.ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get of deleted message %d: %v, want ErrNotFound", id, err)
		}
	}
	if st := b.stats(); st.Completed != 0 || st.Dead != 0 || st.Cancelled != 0 || st.Pending != 1 || st.Waiting != 0 || st.BlockedKeys != 0 {
		t.Fatalf("stats after delete %+v, want only the key's next message pending and the processing one", st)
	}
	if d := b.claimOne(); d.MessageID != behind {
		t.Fatalf("claimed %d, want %d, which the deleted head let go", d.MessageID, behind)
	}
	b.mustComplete(held.Lease)
	// A deleted completed message is gone from the count for good: a
	// prune finds only the one completed since.
	b.clk.Advance(48 * time.Hour)
	if n, err := b.s.Prune(b.ctx, store.Prune{State: store.Completed, Limit: 10}); err != nil || n != 1 {
		t.Fatalf("Prune after delete = %d, %v; want 1", n, err)
	}
	if st := b.stats(); st.Completed != 0 {
		t.Fatalf("completed count after delete and prune: %d, want 0", st.Completed)
	}
}
