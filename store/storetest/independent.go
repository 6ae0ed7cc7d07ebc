package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// claimIndependent claims up to max messages with runs whose leases are
// independent, each for d.
func (b *bundle) claimIndependent(max int, d time.Duration) []store.Delivery {
	b.t.Helper()
	ds, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: "w1", Max: max, LeaseDuration: d, Runs: true, Independent: true})
	if err != nil {
		b.t.Fatalf("Claim with independent runs: %v", err)
	}
	return ds
}

// wantStates checks the states of messages, in order.
func (b *bundle) wantStates(ids []int64, want ...store.State) {
	b.t.Helper()
	for i, id := range ids {
		b.wantState(id, want[i])
	}
}

// A message of a run claimed with independent leases goes back alone,
// counted: the later ones keep their leases, and it is its key's head
// again at once. A run then stops at the first message of its key that
// is processing; a message that goes back behind one that is processing
// waits, and goes when none before it is.
func testRunIndependentRelease(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(keyed("K", 4)...)
	ds := b.claimIndependent(3, lease)
	sameIDs(t, "the run", ids(ds), k[:3])
	if err := b.s.Release(b.ctx, store.Release{Lease: ds[0].Lease}); err != nil {
		t.Fatal(err)
	}
	b.wantStates(k, store.Pending, store.Processing, store.Processing, store.Waiting)
	b.wantDeliveries(k[0], 1)
	ext, err := b.s.Extend(b.ctx, []store.Lease{ds[1].Lease, ds[2].Lease}, lease)
	if err != nil || len(ext.Lost) > 0 {
		t.Fatalf("Extend of the rest of the run = %+v, %v; want both kept", ext, err)
	}
	again := b.claimIndependent(10, lease)
	sameIDs(t, "the head alone, up to the processing message", ids(again), k[:1])
	if again[0].Attempt != 2 {
		t.Fatalf("attempt %d, want 2", again[0].Attempt)
	}
	// Behind a processing message, a message going back waits.
	if err := b.s.Release(b.ctx, store.Release{Lease: ds[1].Lease}); err != nil {
		t.Fatal(err)
	}
	b.wantStates(k, store.Processing, store.Waiting, store.Processing, store.Waiting)
	b.claimNone()
	// Its key's first once the message before it is done, it goes,
	// alone: the next is processing.
	b.mustComplete(again[0].Lease)
	b.wantStates(k, store.Completed, store.Pending, store.Processing, store.Waiting)
	next := b.claimIndependent(10, lease)
	sameIDs(t, "the message that went back", ids(next), k[1:2])
	b.mustComplete(next[0].Lease)
	b.wantState(k[3], store.Waiting)
	b.mustComplete(ds[2].Lease)
	sameIDs(t, "the last", ids(b.claimIndependent(10, lease)), k[3:])

	// A claim without Runs cannot ask for independent leases.
	if _, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: "w1", Max: 1, LeaseDuration: lease, Independent: true}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Claim with Independent and no Runs = %v, want ErrInvalid", err)
	}
}

// When the leases of a run claimed independent end while one of them
// was extended, the reaper gives back those before it, in order, and
// those after it wait behind it, each counted and each dead on its own
// last delivery.
func testRunIndependentReap(t *testing.T, f Factory) {
	b := setup(t, f)
	msgs := keyed("K", 5)
	msgs[4].MaxDeliveries = 1
	k := b.enqueue(msgs...)
	ds := b.claimIndependent(5, time.Second)
	sameIDs(t, "the run", ids(ds), k)
	if ext, err := b.s.Extend(b.ctx, []store.Lease{ds[2].Lease}, 4*time.Second); err != nil || len(ext.Lost) > 0 {
		t.Fatalf("Extend = %+v, %v", ext, err)
	}
	b.clk.Advance(2 * time.Second)
	rs := b.reap()
	if len(rs) != 4 {
		t.Fatalf("Reap = %+v, want 4", rs)
	}
	for _, r := range rs {
		if r.Dead != (r.ID == k[4]) {
			t.Fatalf("Reap = %+v, want only the last dead (its one delivery used)", rs)
		}
	}
	b.wantStates(k, store.Pending, store.Waiting, store.Processing, store.Waiting, store.Dead)
	for _, id := range k[:4] {
		b.wantDeliveries(id, 1)
	}
	before := b.claimIndependent(10, time.Minute)
	sameIDs(t, "the messages before the extended one", ids(before), k[:2])
	for _, d := range before {
		b.mustComplete(d.Lease)
	}
	b.claimNone()
	b.clk.Advance(3 * time.Second)
	b.reap()
	sameIDs(t, "the rest, once the extended lease ends", ids(b.claimIndependent(10, time.Minute)), k[2:4])
}
