package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

func testFencing(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	old := b.claimFor(1, 10*time.Second)[0]
	b.clk.Advance(11 * time.Second)
	if rs := b.reap(); len(rs) != 1 || rs[0].ID != id {
		t.Fatalf("reap = %+v", rs)
	}
	cur := b.claimOne()
	if cur.MessageID != id || cur.FencingToken <= old.FencingToken || cur.Attempt != 2 {
		t.Fatalf("reclaim = %+v after %+v", cur, old)
	}
	before := b.info(id)

	ext, err := b.s.Extend(b.ctx, []store.Lease{old.Lease}, time.Minute)
	if err != nil || len(ext.Lost) != 1 || ext.Lost[0] != old.Lease {
		t.Fatalf("Extend(old) = %+v, %v; want the old lease lost", ext, err)
	}
	wantLost(t, "Complete(old)", b.complete(old.Lease))
	_, err = b.s.Fail(b.ctx, store.Failure{Lease: old.Lease, Error: "boom"})
	wantLost(t, "Fail(old)", err)
	wantLost(t, "Release(old)", b.s.Release(b.ctx, store.Release{Lease: old.Lease}))
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: old.Lease, Reply: &store.NewMessage{Queue: "replies", Payload: []byte("r")}}})
	if err != nil {
		t.Fatal(err)
	}
	wantLost(t, "Complete(old) with reply", errs[0])

	after := b.info(id)
	if !infoEqual(after, before) {
		t.Fatalf("stale lease changed the message:\n before %+v\n after  %+v", before, after)
	}
	if st, _ := b.s.Stats(b.ctx, "replies"); st.Pending != 0 {
		t.Fatal("a refused completion sent its reply")
	}

	if _, err := b.s.Extend(b.ctx, []store.Lease{cur.Lease}, time.Minute); err != nil {
		t.Fatal(err)
	}
	b.mustComplete(cur.Lease)
	b.wantState(id, store.Completed)
}

func infoEqual(a, b store.Info) bool {
	return a.ID == b.ID && a.State == b.State && a.Deliveries == b.Deliveries && a.FencingToken == b.FencingToken &&
		a.LastError == b.LastError && a.LeaseExpires.Equal(b.LeaseExpires) && a.VisibleAt.Equal(b.VisibleAt) &&
		a.WorkerID == b.WorkerID && string(a.Payload) == string(b.Payload)
}

func testExpiredLeaseIsLost(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	d := b.claimFor(1, 10*time.Second)[0]
	b.clk.Advance(10 * time.Second) // expired, not yet reaped
	ext, err := b.s.Extend(b.ctx, []store.Lease{d.Lease}, time.Minute)
	if err != nil || len(ext.Lost) != 1 {
		t.Fatalf("Extend of an expired lease = %+v, %v; want it lost", ext, err)
	}
	wantLost(t, "Complete of an expired lease", b.complete(d.Lease))
	b.wantState(id, store.Processing)

	// Extending before expiry keeps it alive past the first expiry.
	id2 := b.send("y")
	d2 := b.claimFor(1, 10*time.Second)[0]
	b.clk.Advance(9 * time.Second)
	if ext, err := b.s.Extend(b.ctx, []store.Lease{d2.Lease}, 10*time.Second); err != nil || len(ext.Lost) != 0 {
		t.Fatalf("Extend = %+v, %v", ext, err)
	} else if want := b.clk.Now().Add(10 * time.Second); !ext.Expires.Equal(want) {
		t.Fatalf("new expiry %s, want %s", ext.Expires, want)
	}
	b.clk.Advance(9 * time.Second)
	if rs := b.reap(); len(rs) != 1 || rs[0].ID != id {
		t.Fatalf("reap = %+v, want only the unextended message %d", rs, id)
	}
	b.mustComplete(d2.Lease)
	b.wantState(id2, store.Completed)
}

func testFencingTokensIncrease(t *testing.T, f Factory) {
	b := setup(t, f)
	b.send("x")
	b.send("y")
	seen := map[int64]bool{}  // every token minted, to check uniqueness
	last := map[int64]int64{} // message -> its last token
	for i := 0; i < 4; i++ {
		ds := b.claim(10)
		if len(ds) != 2 {
			t.Fatalf("round %d claimed %d", i, len(ds))
		}
		for _, d := range ds {
			if seen[d.FencingToken] {
				t.Fatalf("fencing token %d minted twice", d.FencingToken)
			}
			seen[d.FencingToken] = true
			if d.FencingToken <= last[d.MessageID] {
				t.Fatalf("message %d: fencing token %d after %d", d.MessageID, d.FencingToken, last[d.MessageID])
			}
			last[d.MessageID] = d.FencingToken
			if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func testBatchExtendReportsLost(t *testing.T, f Factory) {
	b := setup(t, f)
	for i := 0; i < 4; i++ {
		b.send(fmt.Sprint(i))
	}
	ds := b.claim(4)
	b.mustComplete(ds[1].Lease)
	if err := b.s.Release(b.ctx, store.Release{Lease: ds[3].Lease}); err != nil {
		t.Fatal(err)
	}
	bogus := store.Lease{MessageID: ds[0].MessageID, FencingToken: ds[0].FencingToken + 1000}
	leases := []store.Lease{ds[0].Lease, ds[1].Lease, ds[2].Lease, ds[3].Lease, bogus, {MessageID: 987654, FencingToken: 1}}
	res, err := b.s.Extend(b.ctx, leases, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[store.Lease]bool{}
	for _, l := range res.Lost {
		lost[l] = true
	}
	want := []store.Lease{ds[1].Lease, ds[3].Lease, bogus, {MessageID: 987654, FencingToken: 1}}
	if len(res.Lost) != len(want) {
		t.Fatalf("lost %v, want %v", res.Lost, want)
	}
	for _, l := range want {
		if !lost[l] {
			t.Fatalf("lost %v, want %v", res.Lost, want)
		}
	}
	if in := b.info(ds[0].MessageID); !in.LeaseExpires.Equal(b.clk.Now().Add(time.Hour)) {
		t.Fatalf("extended lease expires %s", in.LeaseExpires)
	}
	if res, err := b.s.Extend(b.ctx, nil, time.Hour); err != nil || len(res.Lost) != 0 || !res.Expires.Equal(b.clk.Now().Add(time.Hour)) {
		t.Fatalf("empty Extend = %+v, %v", res, err)
	}
	if res, err := b.s.Extend(b.ctx, []store.Lease{bogus}, time.Minute); err != nil || len(res.Lost) != 1 || !res.Expires.Equal(b.clk.Now().Add(time.Minute)) {
		t.Fatalf("Extend of a lost lease = %+v, %v; want it lost and the expiry reported", res, err)
	}
}
