package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// Claims take the highest priority first, then the earliest visible, then
// the oldest; delayed messages wait whatever their priority, and a key's
// messages still run one at a time in enqueue order.
func testPriority(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.enqueue(
		store.NewMessage{Payload: []byte("default")},
		store.NewMessage{Priority: 5, Payload: []byte("high")},
		store.NewMessage{Priority: -3, Payload: []byte("low")},
		store.NewMessage{Priority: 5, Payload: []byte("high, younger")},
		store.NewMessage{Priority: 10, Delay: time.Minute, Payload: []byte("highest, delayed")},
		store.NewMessage{Key: "k", Payload: []byte("head of k")},
		store.NewMessage{Key: "k", Priority: store.MaxPriority, Payload: []byte("behind the head")},
	)
	def, high, low, younger, delayed, head, behind := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]
	ds := b.claim(4)
	got := make([]int64, len(ds))
	for i, d := range ds {
		got[i] = d.MessageID
	}
	if want := []int64{high, younger, def, head}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v: by priority, then id", got, want)
	}
	if ds[0].Priority != 5 || ds[2].Priority != 0 {
		t.Fatalf("deliveries carry priorities %d and %d, want 5 and 0", ds[0].Priority, ds[2].Priority)
	}
	if in := b.info(behind); in.Priority != store.MaxPriority || in.State != store.Waiting {
		t.Fatalf("the key's second message: %+v, want waiting with its priority", in)
	}
	b.mustComplete(ds[3].Lease) // the key's head: the next may go
	if d := b.claimOne(); d.MessageID != behind {
		t.Fatalf("claimed %d, want %d, the key's next message and the highest priority", d.MessageID, behind)
	}
	b.clk.Advance(time.Minute)
	if d := b.claimOne(); d.MessageID != delayed {
		t.Fatalf("claimed %d, want %d, visible now and the highest priority", d.MessageID, delayed)
	}
	if d := b.claimOne(); d.MessageID != low {
		t.Fatalf("claimed %d, want %d, the last one", d.MessageID, low)
	}
	for _, p := range []int{store.MaxPriority + 1, store.MinPriority - 1} {
		if _, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, Priority: p}}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("priority %d: %v, want ErrInvalid", p, err)
		}
	}
}
