package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// enqueueUnique enqueues one message of unique key k on queue q, with
// the given unique states, and returns the outcome.
func (b *bundle) enqueueUnique(q, k string, states ...store.State) store.Enqueued {
	b.t.Helper()
	res, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: q, Payload: []byte(k), UniqueKey: k, UniqueStates: states}})
	if err != nil {
		b.t.Fatalf("Enqueue of unique key %q: %v", k, err)
	}
	return res[0]
}

// A message with a unique key is a duplicate while a message of its key,
// in any queue, is in one of its unique states: by default every state
// but dead and cancelled. Without such a message it is enqueued.
func testUniqueKeys(t *testing.T, f Factory) {
	b := setup(t, f)
	first := b.enqueueUnique(b.queue, "u")
	if again := b.enqueueUnique("elsewhere", "u"); !again.Duplicate || again.ID != first.ID {
		t.Fatalf("a second message of key u in another queue = %+v, want a duplicate of %d", again, first.ID)
	}
	res, err := b.s.Enqueue(b.ctx, []store.NewMessage{
		{Queue: b.queue, UniqueKey: "pair"}, {Queue: b.queue, UniqueKey: "pair"}, {Queue: b.queue, UniqueKey: "other"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || !res[1].Duplicate || res[1].ID != res[0].ID || res[2].Duplicate {
		t.Fatalf("a batch with a key twice = %+v, want the second a duplicate of the first", res)
	}
	for _, d := range b.claim(10) {
		if d.MessageID == first.ID {
			// Processing, then completed: both count by default.
			if again := b.enqueueUnique(b.queue, "u"); again.ID != first.ID {
				t.Fatalf("while processing: %+v, want a duplicate of %d", again, first.ID)
			}
			b.mustComplete(d.Lease)
		} else {
			if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "no", Permanent: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if again := b.enqueueUnique(b.queue, "u"); again.ID != first.ID {
		t.Fatalf("after completion: %+v, want a duplicate of %d", again, first.ID)
	}
	if again := b.enqueueUnique(b.queue, "pair"); again.Duplicate {
		t.Fatalf("a key whose message is dead = %+v, want a new message", again)
	}
	// States of the caller's choosing: only pending ones count here.
	if again := b.enqueueUnique(b.queue, "u", store.Pending); again.Duplicate {
		t.Fatalf("with only pending counting, behind a completed message: %+v, want a new message", again)
	}
	// A pruned message counts no more.
	b.clk.Advance(store.DefaultDedupWindow + time.Minute)
	if n, err := b.prune(store.Completed, time.Second, 100); err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want the completed message", n, err)
	}
	if again := b.enqueueUnique(b.queue, "u", store.Completed); again.Duplicate {
		t.Fatalf("after the completed message was pruned: %+v, want a new message", again)
	}

	// Bad input is refused, and changes nothing.
	before := b.stats()
	for what, m := range map[string]store.NewMessage{
		"states without a key": {Queue: b.queue, UniqueStates: []store.State{store.Pending}},
		"a state out of range": {Queue: b.queue, UniqueKey: "k", UniqueStates: []store.State{store.State(store.States)}},
	} {
		if _, err := b.s.Enqueue(b.ctx, []store.NewMessage{m}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Enqueue with %s: %v, want ErrInvalid", what, err)
		}
	}
	if after := b.stats(); after != before {
		t.Fatalf("refused enqueues changed the stats from %+v to %+v", before, after)
	}
}

// Enqueues of one unique key at once, from many callers, make one
// message: every caller gets its id.
func testUniqueKeysConcurrently(t *testing.T, f Factory) {
	b := setup(t, f)
	const n = 8
	got := make([]store.Enqueued, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var res []store.Enqueued
			res, errs[i] = b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, UniqueKey: "once"}})
			if errs[i] == nil {
				got[i] = res[0]
			}
		})
	}
	wg.Wait()
	fresh := 0
	for i, r := range got {
		if errs[i] != nil {
			t.Fatalf("Enqueue %d: %v", i, errs[i])
		}
		if !r.Duplicate {
			fresh++
		}
		if r.ID != got[0].ID {
			t.Fatalf("enqueues of one key at once gave ids %+v, want one", got)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d of %d enqueues at once made a message, want 1: %+v", fresh, n, got)
	}
	if st := b.stats(); st.Pending != 1 {
		t.Fatalf("pending %d, want 1", st.Pending)
	}
}
