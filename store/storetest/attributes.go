package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// A message's attributes come back as they were given from Claim and
// List, whichever way it was enqueued (with a key or a dedup id, or
// without, or as a reply); none, nil or empty, comes back nil.
func testMessageAttributes(t *testing.T, f Factory) {
	b := setup(t, f)
	binary := []byte("\x00\xff{\"a\":1}\n")
	want := map[int64][]byte{}
	plain := b.enqueue(
		store.NewMessage{Payload: []byte("a"), Attributes: binary},
		store.NewMessage{Payload: []byte("b")},
		store.NewMessage{Payload: []byte("c"), Attributes: []byte{}},
	)
	want[plain[0]], want[plain[1]], want[plain[2]] = binary, nil, nil
	keyed := b.enqueue(
		store.NewMessage{Payload: []byte("d"), Key: "k", Attributes: []byte("keyed")},
		store.NewMessage{Payload: []byte("e"), DedupID: "x", Attributes: []byte{}},
	)
	want[keyed[0]], want[keyed[1]] = []byte("keyed"), nil
	check := func(what string, id int64, got []byte) {
		t.Helper()
		if !bytes.Equal(got, want[id]) || (got == nil) != (want[id] == nil) {
			t.Fatalf("%s: message %d has attributes %q (nil %t), want %q (nil %t)", what, id, got, got == nil, want[id], want[id] == nil)
		}
	}
	for _, in := range b.list(store.Pending) {
		check("List of pending messages", in.ID, in.Attributes)
	}
	ds := b.claim(10)
	if len(ds) != 5 {
		t.Fatalf("claimed %d, want 5", len(ds))
	}
	for _, d := range ds {
		check("Claim", d.MessageID, d.Attributes)
		if d.MessageID == plain[0] && string(d.Payload) != "a" {
			t.Fatalf("the payload beside the attributes came back as %q", d.Payload)
		}
	}
	for _, in := range b.list(store.Processing) {
		check("List of processing messages", in.ID, in.Attributes)
	}

	// A reply carries its attributes too.
	reply := &store.NewMessage{Queue: "replies", Payload: []byte("r"), Attributes: []byte("reply attributes")}
	if errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: ds[0].Lease, Reply: reply}}); err != nil || errs[0] != nil {
		t.Fatalf("Complete with a reply: %v, %v", errs, err)
	}
	rs, err := b.s.Claim(b.ctx, store.Claim{Queue: "replies", WorkerID: "w", Max: 1, LeaseDuration: lease})
	if err != nil || len(rs) != 1 || string(rs[0].Attributes) != "reply attributes" {
		t.Fatalf("claim of the reply = %+v, %v; want its attributes", rs, err)
	}
	check("List of a completed message", ds[0].MessageID, b.info(ds[0].MessageID).Attributes)
}

// The payload and the attributes share the payload limit: together at
// the limit they are accepted, one byte over it they are ErrInvalid, and
// nothing is enqueued.
func testAttributesCountTowardThePayloadLimit(t *testing.T, f Factory) {
	b := setup(t, f)
	payload := make([]byte, store.DefaultPayloadLimit-10)
	over := []store.NewMessage{{Queue: b.queue, Payload: payload, Attributes: make([]byte, 11)}}
	if _, err := b.s.Enqueue(b.ctx, over); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Enqueue of a payload and attributes over the limit: %v, want ErrInvalid", err)
	}
	if _, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, Attributes: make([]byte, store.DefaultPayloadLimit+1)}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Enqueue of attributes alone over the limit: %v, want ErrInvalid", err)
	}
	d := func() store.Delivery {
		b.send("x")
		return b.claimOne()
	}()
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: d.Lease, Reply: &store.NewMessage{Queue: "replies", Payload: payload, Attributes: make([]byte, 11)}}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Complete with a reply over the limit: %v, %v; want ErrInvalid", errs, err)
	}
	if st := b.stats(); st.Pending != 0 || st.Processing != 1 {
		t.Fatalf("refused calls changed the queue: %+v", st)
	}
	b.enqueue(store.NewMessage{Payload: payload, Attributes: make([]byte, 10)})
	if st := b.stats(); st.Pending != 1 {
		t.Fatalf("a payload and attributes at the limit: %d pending, want 1", st.Pending)
	}
}

// FirstClaimedAt is the time of a message's first claim, kept through
// releases, reaps, retries, redrives and the claims after them; a message
// never claimed lists it as zero.
func testFirstClaimedAt(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	if in := b.wantState(id, store.Pending); !in.FirstClaimedAt.IsZero() {
		t.Fatalf("a message never claimed lists FirstClaimedAt %s", in.FirstClaimedAt)
	}
	b.clk.Advance(time.Second)
	first := b.clk.Now()
	claimAndCheck := func(what string, attempt int) store.Delivery {
		t.Helper()
		ds := b.claimFor(1, 10*time.Second)
		if len(ds) != 1 || ds[0].MessageID != id {
			t.Fatalf("%s: claimed %v, want message %d", what, ds, id)
		}
		if d := ds[0]; !d.FirstClaimedAt.Equal(first) || d.Attempt != attempt {
			t.Fatalf("%s: attempt %d first claimed at %s, want attempt %d first claimed at %s", what, d.Attempt, d.FirstClaimedAt, attempt, first)
		}
		if in := b.wantState(id, store.Processing); !in.FirstClaimedAt.Equal(first) {
			t.Fatalf("%s: listed as first claimed at %s, want %s", what, in.FirstClaimedAt, first)
		}
		return ds[0]
	}
	d := claimAndCheck("the first claim", 1)

	b.clk.Advance(time.Second)
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(id, store.Pending); !in.FirstClaimedAt.Equal(first) {
		t.Fatalf("released: listed as first claimed at %s, want %s", in.FirstClaimedAt, first)
	}
	b.clk.Advance(time.Second)
	claimAndCheck("the claim after a release", 2)

	b.clk.Advance(10 * time.Second)
	if rs := b.reap(); len(rs) != 1 {
		t.Fatalf("reaped %v, want the message", rs)
	}
	d = claimAndCheck("the claim after a reap", 3)

	b.clk.Advance(time.Second)
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "no", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(id, store.Dead); !in.FirstClaimedAt.Equal(first) {
		t.Fatalf("dead: listed as first claimed at %s, want %s", in.FirstClaimedAt, first)
	}
	if n, err := b.s.Redrive(b.ctx, b.queue, nil); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	b.clk.Advance(time.Second)
	claimAndCheck("the claim after a redrive", 1)
}

// Stats counts the pending messages that are not visible yet as delayed:
// a delay, a retry delay or a release's delay; a visible message, or one
// waiting behind its key, is not delayed.
func testStatsDelayed(t *testing.T, f Factory) {
	b := setup(t, f)
	b.enqueue(
		store.NewMessage{Payload: []byte("visible")},
		store.NewMessage{Payload: []byte("delayed"), Delay: time.Minute},
		store.NewMessage{Payload: []byte("head"), Key: "k"},
		store.NewMessage{Payload: []byte("waiting"), Key: "k", Delay: time.Hour},
	)
	if st := b.stats(); st.Pending != 3 || st.Waiting != 1 || st.Delayed != 1 {
		t.Fatalf("stats %+v; want 3 pending, one of them delayed, and 1 waiting", st)
	}
	b.clk.Advance(time.Minute)
	if st := b.stats(); st.Pending != 3 || st.Delayed != 0 {
		t.Fatalf("stats once the delay is over: %+v; want 3 pending, none delayed", st)
	}
	ds := b.claim(2)
	if len(ds) != 2 {
		t.Fatalf("claimed %d, want 2", len(ds))
	}
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[0].Lease, Error: "again", RetryDelay: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Release(b.ctx, store.Release{Lease: ds[1].Lease, Delay: time.Second, Uncount: true}); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(); st.Pending != 3 || st.Delayed != 2 {
		t.Fatalf("stats after a retry and a release, each delayed: %+v; want 3 pending, 2 delayed", st)
	}
	b.clk.Advance(time.Second)
	if st := b.stats(); st.Pending != 3 || st.Delayed != 0 {
		t.Fatalf("stats once the delays are over: %+v; want 3 pending, none delayed", st)
	}
}

// list lists the suite's queue's messages in one state.
func (b *bundle) list(state store.State) []store.Info {
	b.t.Helper()
	infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: state, Limit: store.MaxBatch})
	if err != nil {
		b.t.Fatalf("List: %v", err)
	}
	return infos
}
