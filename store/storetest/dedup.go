package storetest

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

func testDedup(t *testing.T, f Factory) {
	b := setup(t, f)
	first := b.enqueue(store.NewMessage{Payload: []byte("1"), DedupID: "order-7"})[0]
	res, err := b.s.Enqueue(b.ctx, []store.NewMessage{
		{Queue: b.queue, Payload: []byte("2"), DedupID: "order-7"},
		{Queue: b.queue, Payload: []byte("3"), DedupID: "order-8"},
		{Queue: "elsewhere", Payload: []byte("4"), DedupID: "order-7"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].ID != first {
		t.Fatalf("duplicate enqueue = %+v, want the first id %d", res[0], first)
	}
	if res[1].Duplicate || res[2].Duplicate || res[2].ID == first {
		t.Fatalf("distinct dedup ids or queues were treated as duplicates: %+v", res)
	}
	if st := b.stats(); st.Pending != 2 {
		t.Fatalf("pending %d, want 2", st.Pending)
	}

	// Still a duplicate after the first completed, within the window.
	for _, d := range b.claim(10) {
		b.mustComplete(d.Lease)
	}
	b.clk.Advance(store.DefaultDedupWindow - time.Second)
	again := b.enqueue(store.NewMessage{Payload: []byte("5"), DedupID: "order-7"})
	if again[0] != first {
		t.Fatalf("enqueue after completion, inside the window, got id %d, want %d", again[0], first)
	}
	b.claimNone()

	// Past the window it is a new message.
	b.clk.Advance(time.Second)
	fresh, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, Payload: []byte("6"), DedupID: "order-7"}})
	if err != nil || fresh[0].Duplicate || fresh[0].ID == first {
		t.Fatalf("enqueue past the window = %+v, %v; want a new message", fresh, err)
	}
	if d := b.claimOne(); string(d.Payload) != "6" {
		t.Fatalf("claimed %q", d.Payload)
	}
	// And the new one deduplicates from now on.
	if r := b.enqueue(store.NewMessage{Payload: []byte("7"), DedupID: "order-7"}); r[0] != fresh[0].ID {
		t.Fatalf("dedup now points at %d, want %d", r[0], fresh[0].ID)
	}
}
