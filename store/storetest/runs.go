package storetest

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// claimRuns claims up to max messages with runs.
func (b *bundle) claimRuns(max int) []store.Delivery {
	b.t.Helper()
	ds, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: "w1", Max: max, LeaseDuration: lease, Runs: true})
	if err != nil {
		b.t.Fatalf("Claim with runs: %v", err)
	}
	return ds
}

// keyed returns n messages of key k, numbered from 1 in their payloads.
func keyed(k string, n int) []store.NewMessage {
	out := make([]store.NewMessage, n)
	for i := range out {
		out[i] = store.NewMessage{Payload: []byte{byte('0' + i + 1)}, Key: k}
	}
	return out
}

func (b *bundle) wantDeliveries(id int64, want int) {
	b.t.Helper()
	if in := b.info(id); in.Deliveries != want {
		b.t.Fatalf("message %d has %d deliveries, want %d", id, in.Deliveries, want)
	}
}

// A claim with runs takes a keyed message with the next messages of its
// key, in order, each under its own lease and counted, up to Max in all;
// each key's messages come together, in claim order of their heads. The
// key stays busy until none of the run is processing, whatever order its
// messages complete in.
func testRunClaim(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(keyed("K", 5)...)
	l := b.enqueue(keyed("L", 2)...)
	free := b.send("free")
	ds := b.claimRuns(4)
	sameIDs(t, "a run of K", ids(ds), k[:4])
	tokens := map[int64]bool{}
	for _, d := range ds {
		if d.Attempt != 1 || d.Key != "K" || tokens[d.FencingToken] {
			t.Fatalf("delivery %+v: want attempt 1 of key K with a token of its own", d)
		}
		tokens[d.FencingToken] = true
		b.wantState(d.MessageID, store.Processing)
	}
	if st := b.stats(); st.Processing != 4 || st.Waiting != 2 || st.Pending != 2 {
		t.Fatalf("stats %+v, want 4 processing, 2 waiting (k5, l2), 2 pending (l1, free)", st)
	}
	sameIDs(t, "the next claim", ids(b.claimRuns(10)), []int64{l[0], l[1], free})
	b.claimNone()
	// Out of order: the key goes on only when the whole run is done.
	for _, i := range []int{1, 0, 3} {
		b.mustComplete(ds[i].Lease)
		b.claimNone()
		b.wantState(k[4], store.Waiting)
	}
	b.mustComplete(ds[2].Lease)
	sameIDs(t, "after the run", ids(b.claimRuns(10)), k[4:])
}

// A run stops at Max, and at the first message of its key that is not
// visible yet; a claim without runs takes one message of a key.
func testRunLimits(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(store.NewMessage{Payload: []byte("1"), Key: "K"}, store.NewMessage{Payload: []byte("2"), Key: "K"},
		store.NewMessage{Payload: []byte("3"), Key: "K", Delay: time.Minute}, store.NewMessage{Payload: []byte("4"), Key: "K"})
	ds := b.claimRuns(1)
	sameIDs(t, "a run of at most 1", ids(ds), k[:1])
	b.mustComplete(ds[0].Lease)
	ds = b.claimRuns(10)
	sameIDs(t, "a run up to the delayed message", ids(ds), k[1:2])
	b.mustComplete(ds[0].Lease)
	b.clk.Advance(time.Minute)
	ds = b.claim(10)
	sameIDs(t, "a claim without runs", ids(ds), k[2:3])
	b.mustComplete(ds[0].Lease)
	sameIDs(t, "the last", ids(b.claimRuns(10)), k[3:])
}

// A message of a run that fails and will be retried brings back the
// later messages of its key that are still processing: their leases are
// lost and their deliveries taken back. It waits behind an earlier
// message of the run that is still processing, and becomes the head when
// that one is done; the run comes again in order.
func testRunFailBringsRestBack(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(keyed("K", 5)...)
	ds := b.claimRuns(4)
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[1].Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []store.State{store.Processing, store.Waiting, store.Waiting, store.Waiting, store.Waiting} {
		b.wantState(k[i], want)
	}
	b.wantDeliveries(k[1], 1)
	b.wantDeliveries(k[2], 0)
	b.wantDeliveries(k[3], 0)
	ext, err := b.s.Extend(b.ctx, []store.Lease{ds[0].Lease, ds[2].Lease, ds[3].Lease}, lease)
	if err != nil {
		t.Fatal(err)
	}
	sameLeases(t, "lost", ext.Lost, []store.Lease{ds[2].Lease, ds[3].Lease})
	wantLost(t, "Complete of a message brought back", b.complete(ds[2].Lease))
	b.claimNone()
	b.mustComplete(ds[0].Lease)
	again := b.claimRuns(10)
	sameIDs(t, "the run again", ids(again), k[1:])
	if again[0].Attempt != 2 || again[1].Attempt != 1 || again[2].Attempt != 1 {
		t.Fatalf("attempts %d, %d, %d; want 2, 1, 1", again[0].Attempt, again[1].Attempt, again[2].Attempt)
	}
	// The first message of a run going back is the key's head again.
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: again[0].Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	b.wantState(k[1], store.Pending)
	b.wantState(k[2], store.Waiting)
	sameIDs(t, "the run from its head", ids(b.claimRuns(10)), k[1:])

	// The lease of a message brought back stays lost when the message
	// becomes its key's head, before any claim: no late completion goes
	// through under it.
	j := b.enqueue(keyed("J", 2)...)
	run := b.claimRuns(2)
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: run[0].Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	b.mustCompleteLate(run[0].Lease)
	b.wantState(j[1], store.Pending)
	wantLost(t, "late Complete of a message brought back, now its key's head", b.completeLate(store.Completion{Lease: run[1].Lease})[0])
	b.wantState(j[1], store.Pending)
}

// An uncounted release of a run's message brings the rest back as a
// failure does; so does the reaper, of a run whose leases expired: the
// first is counted, the rest not.
func testRunReleaseAndReap(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(keyed("K", 3)...)
	ds := b.claimRuns(3)
	if err := b.s.Release(b.ctx, store.Release{Lease: ds[0].Lease, Uncount: true}); err != nil {
		t.Fatal(err)
	}
	b.wantState(k[0], store.Pending)
	for _, id := range k {
		b.wantDeliveries(id, 0)
	}
	ds = b.claimRuns(3)
	sameIDs(t, "after the release", ids(ds), k)
	b.clk.Advance(lease)
	if rs := b.reap(); len(rs) != 3 || rs[0].Dead || rs[1].Dead || rs[2].Dead {
		t.Fatalf("Reap = %+v, want 3 back", rs)
	}
	b.wantState(k[0], store.Pending)
	b.wantState(k[1], store.Waiting)
	b.wantState(k[2], store.Waiting)
	b.wantDeliveries(k[0], 1)
	b.wantDeliveries(k[1], 0)
	sameIDs(t, "after the reap", ids(b.claimRuns(3)), k)
}

// A head that keeps failing does not use up the budgets of the messages
// claimed with it: when it dies, the next goes on with its own.
func testRunPoisonHead(t *testing.T, f Factory) {
	b := setup(t, f)
	msgs := keyed("K", 3)
	msgs[0].MaxDeliveries = 2
	k := b.enqueue(msgs...)
	for range 2 {
		sameIDs(t, "the run", ids(b.claimRuns(3)), k)
		b.clk.Advance(lease)
		b.reap()
	}
	b.wantState(k[0], store.Dead)
	b.wantState(k[1], store.Pending)
	b.wantDeliveries(k[1], 1)
	b.wantDeliveries(k[2], 0)
}

// A message of a run that dies or is cancelled lets the rest run on; the
// key's next message goes when the whole run is done.
func testRunDeadOrCancelledGoesOn(t *testing.T, f Factory) {
	b := setup(t, f)
	msgs := keyed("K", 4)
	msgs[0].MaxDeliveries = 1
	k := b.enqueue(msgs...)
	ds := b.claimRuns(3)
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[0].Lease, Error: "boom"}); !dead || err != nil {
		t.Fatalf("Fail = %v, %v; want dead", dead, err)
	}
	if _, err := b.s.Cancel(b.ctx, b.queue, []int64{k[1]}); err != nil {
		t.Fatal(err)
	}
	b.wantState(k[2], store.Processing)
	b.claimNone()
	b.mustComplete(ds[2].Lease)
	sameIDs(t, "after the run", ids(b.claimRuns(3)), k[3:])
}

// BlockedKeys names a run's first message as its key's head.
func testRunBlockedKeys(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(keyed("K", 3)...)
	b.claimRuns(2)
	bks, err := b.s.BlockedKeys(b.ctx, b.queue, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(bks) != 1 || bks[0].Key != "K" || bks[0].Waiting != 1 || bks[0].Head.ID != k[0] {
		t.Fatalf("BlockedKeys = %+v, want K with 1 waiting behind %d", bks, k[0])
	}
}

func sameLeases(t *testing.T, what string, got, want []store.Lease) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}
