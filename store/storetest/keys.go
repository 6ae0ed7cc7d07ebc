package storetest

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

func testKeyFIFO(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(
		store.NewMessage{Payload: []byte("k1"), Key: "K"},
		store.NewMessage{Payload: []byte("k2"), Key: "K"},
		store.NewMessage{Payload: []byte("free")},
		store.NewMessage{Payload: []byte("l1"), Key: "L"},
		store.NewMessage{Payload: []byte("k3"), Key: "K"},
	)
	if st := b.stats(); st.Pending != 3 || st.Waiting != 2 || st.BlockedKeys != 1 {
		t.Fatalf("stats %+v, want 3 pending, 2 waiting behind 1 blocked key", st)
	}
	b.wantState(k[1], store.Waiting)
	ds := b.claim(10)
	sameIDs(t, "first claim", ids(ds), []int64{k[0], k[2], k[3]})
	b.claimNone()
	// Completing the head lets exactly the next one go.
	b.mustComplete(ds[0].Lease)
	d := b.claimOne()
	if d.MessageID != k[1] {
		t.Fatalf("after k1 completed, claimed %d, want k2 (%d)", d.MessageID, k[1])
	}
	b.claimNone()
	b.mustComplete(d.Lease)
	if d := b.claimOne(); d.MessageID != k[4] {
		t.Fatalf("claimed %d, want k3", d.MessageID)
	}
	if st := b.stats(); st.Waiting != 0 || st.BlockedKeys != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A key seen again after its line emptied starts a new line.
	b.mustComplete(ds[2].Lease)
	again := b.enqueue(store.NewMessage{Payload: []byte("l2"), Key: "L"})
	if d := b.claimOne(); d.MessageID != again[0] {
		t.Fatalf("claimed %d, want the new head of L", d.MessageID)
	}
}

func testKeyRetryingHeadBlocks(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(store.NewMessage{Payload: []byte("k1"), Key: "K", MaxDeliveries: 3}, store.NewMessage{Payload: []byte("k2"), Key: "K"})
	d := b.claimOne()
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "try again", RetryDelay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(30 * time.Second)
	b.claimNone() // k2 stays behind its retrying head
	if st := b.stats(); st.BlockedKeys != 1 {
		t.Fatalf("blocked keys %d, want 1", st.BlockedKeys)
	}
	b.clk.Advance(30 * time.Second)
	if d := b.claimOne(); d.MessageID != k[0] || d.Attempt != 2 {
		t.Fatalf("claimed %+v, want the retried head", d)
	}
	// A lease that expires also keeps the key blocked.
	b.clk.Advance(lease)
	b.reap()
	if d := b.claimOne(); d.MessageID != k[0] {
		t.Fatalf("claimed %d after reap, want the head again", d.MessageID)
	}
}

func testKeyDeadHeadUnblocks(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(store.NewMessage{Payload: []byte("k1"), Key: "K", MaxDeliveries: 1}, store.NewMessage{Payload: []byte("k2"), Key: "K"})
	d := b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "no"}); err != nil || !dead {
		t.Fatalf("Fail = %v, %v", dead, err)
	}
	if d := b.claimOne(); d.MessageID != k[1] {
		t.Fatalf("claimed %d, want k2 once k1 is dead", d.MessageID)
	}
	// The reaper's dead-lettering unblocks too.
	k3 := b.enqueue(store.NewMessage{Payload: []byte("m1"), Key: "M", MaxDeliveries: 1}, store.NewMessage{Payload: []byte("m2"), Key: "M"})
	b.claimFor(1, time.Second)
	b.clk.Advance(time.Second)
	if rs := b.reap(); len(rs) != 1 || !rs[0].Dead {
		t.Fatalf("reap = %+v", rs)
	}
	if d := b.claimOne(); d.MessageID != k3[1] {
		t.Fatalf("claimed %d, want m2", d.MessageID)
	}
}

func testKeyRedriveWaitsBehindHead(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(store.NewMessage{Payload: []byte("k1"), Key: "K"}, store.NewMessage{Payload: []byte("k2"), Key: "K"}, store.NewMessage{Payload: []byte("k3"), Key: "K"})
	b.killOne(k[0])
	head := b.claimOne()
	if head.MessageID != k[1] {
		t.Fatalf("claimed %d", head.MessageID)
	}
	if _, err := b.s.Redrive(b.ctx, b.queue, nil); err != nil {
		t.Fatal(err)
	}
	// k1 is back but must not run beside the in-flight k2; it runs next.
	b.wantState(k[0], store.Waiting)
	b.claimNone()
	b.mustComplete(head.Lease)
	if d := b.claimOne(); d.MessageID != k[0] {
		t.Fatalf("claimed %d, want the redriven k1 (oldest)", d.MessageID)
	}
}
