package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// A paused queue gives no claims, in any process, until it is resumed:
// enqueues, completions of messages already claimed and the reaper go on.
// Resuming wakes the queue's receivers.
func testPauseAndResume(t *testing.T, f Factory) {
	b := setup(t, f)
	running := b.enqueue(store.NewMessage{Payload: []byte("running")})[0]
	d := b.claimOne()
	if d.MessageID != running {
		t.Fatalf("claimed %d, want %d", d.MessageID, running)
	}
	if b.stats().Paused {
		t.Fatal("a queue is paused before anyone paused it")
	}
	for range 2 { // pausing a paused queue is no error
		if err := b.s.Pause(b.ctx, b.queue); err != nil {
			t.Fatalf("Pause: %v", err)
		}
	}
	if !b.stats().Paused {
		t.Fatal("Stats does not say the queue is paused")
	}
	other := b.enqueue(store.NewMessage{Queue: "other", Payload: []byte("other")})[0]
	waiting := b.send("enqueued while paused")
	b.claimNone()
	if got := b.claimFrom("other"); got != other {
		t.Fatalf("claimed %d from another queue, want %d: a pause holds one queue only", got, other)
	}
	b.mustComplete(d.Lease) // a message claimed before the pause finishes

	// The reaper still takes expired leases back, and they wait too.
	late := b.send("claimed, then paused, then expired")
	if err := b.s.Resume(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	ds := b.claimFor(2, time.Second)
	if len(ds) != 2 || ds[0].MessageID != waiting || ds[1].MessageID != late {
		t.Fatalf("after Resume claimed %v, want %d and %d", ds, waiting, late)
	}
	if err := b.s.Pause(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(2 * time.Second)
	if n := len(b.reap()); n != 2 {
		t.Fatalf("the reaper took %d back from a paused queue, want 2", n)
	}
	b.claimNone()

	wake := b.s.Wakeup(b.queue)
	for range 2 { // resuming a running queue is no error
		if err := b.s.Resume(b.ctx, b.queue); err != nil {
			t.Fatalf("Resume: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("Resume did not wake the queue's receivers")
	}
	if b.stats().Paused {
		t.Fatal("Stats says a resumed queue is paused")
	}
	if got := len(b.claim(10)); got != 2 {
		t.Fatalf("claimed %d after Resume, want 2", got)
	}

	if err := b.s.Pause(b.ctx, ""); err == nil {
		t.Fatal("Pause of an empty queue name succeeded")
	}
}

// claimFrom claims one message of queue and returns its id.
func (b *bundle) claimFrom(queue string) int64 {
	b.t.Helper()
	ds, err := b.s.Claim(b.ctx, store.Claim{Queue: queue, Max: 1, WorkerID: "w", LeaseDuration: lease})
	if err != nil || len(ds) != 1 {
		b.t.Fatalf("Claim from %s: %v, %v", queue, ds, err)
	}
	return ds[0].MessageID
}
