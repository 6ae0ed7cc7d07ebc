package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

func (b *bundle) completeLate(cs ...store.Completion) []error {
	b.t.Helper()
	for i := range cs {
		cs[i].Late = true
	}
	errs, err := b.s.Complete(b.ctx, cs)
	if err != nil {
		b.t.Fatalf("Complete: %v", err)
	}
	return errs
}

func (b *bundle) mustCompleteLate(l store.Lease) {
	b.t.Helper()
	if err := b.completeLate(store.Completion{Lease: l})[0]; err != nil {
		b.t.Fatalf("late Complete(%s): %v", l, err)
	}
}

// wantCompletedUnder checks that the message is completed and keeps the
// lease's token.
func (b *bundle) wantCompletedUnder(l store.Lease) {
	b.t.Helper()
	if in := b.wantState(l.MessageID, store.Completed); in.FencingToken != l.FencingToken {
		b.t.Fatalf("message %d completed with token %d, want %d", l.MessageID, in.FencingToken, l.FencingToken)
	}
}

// A late completion goes through while no claim has taken the message
// since its lease: processing after the lease expired, or pending again
// after a reap, a release or a retry.
func testLateCompletion(t *testing.T, f Factory) {
	b := setup(t, f)
	given := func(back func(store.Delivery)) store.Lease {
		t.Helper()
		b.send("m")
		d := b.claimOne()
		back(d)
		return d.Lease
	}
	cases := map[string]func(store.Delivery){
		"expired": func(store.Delivery) { b.clk.Advance(lease) },
		"reaped":  func(store.Delivery) { b.clk.Advance(lease); b.reap() },
		"released": func(d store.Delivery) {
			if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
				t.Fatal(err)
			}
		},
		"released uncounted": func(d store.Delivery) {
			if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Uncount: true, Delay: time.Minute}); err != nil {
				t.Fatal(err)
			}
		},
		"retried": func(d store.Delivery) {
			if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "boom", RetryDelay: time.Minute}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, back := range cases {
		l := given(back)
		if err := b.completeLate(store.Completion{Lease: l})[0]; err != nil {
			t.Fatalf("%s: late Complete = %v, want nil", name, err)
		}
		b.wantCompletedUnder(l)
	}
	if st := b.stats(); st.Completed != int64(len(cases)) || st.Pending != 0 || st.Processing != 0 {
		t.Fatalf("stats %+v, want %d completed and nothing else", st, len(cases))
	}
}

// A late completion repeated with the lease that completed the message
// succeeds and changes nothing, its reply not sent again; so does one
// listed twice in a batch. A completion without Late is fenced as before.
func testLateCompletionRepeated(t *testing.T, f Factory) {
	b := setup(t, f)
	b.send("m")
	d := b.claimOne()
	reply := func() *store.NewMessage { return &store.NewMessage{Queue: "replies", Payload: []byte("r")} }
	b.clk.Advance(lease)
	wantLost(t, "a strict Complete of an expired lease", b.complete(d.Lease))
	errs := b.completeLate(store.Completion{Lease: d.Lease, Reply: reply()}, store.Completion{Lease: d.Lease, Reply: reply()})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("late Complete listed twice = %v, want two successes", errs)
	}
	b.mustCompleteLate(d.Lease)
	wantLost(t, "a strict Complete repeated", b.complete(d.Lease))
	b.wantCompletedUnder(d.Lease)
	if st := b.stats(); st.Completed != 1 {
		t.Fatalf("%d completed, want 1", st.Completed)
	}
	if st, err := b.s.Stats(b.ctx, "replies"); err != nil || st.Pending != 1 {
		t.Fatalf("replies: %+v, %v; want one reply", st, err)
	}
}

// A late completion is refused, changing nothing, once a claim has taken
// the message since, or when the message is dead, cancelled or waiting
// behind its key.
func testLateCompletionRefused(t *testing.T, f Factory) {
	b := setup(t, f)
	b.send("claimed again")
	old := b.claimOne()
	b.clk.Advance(lease)
	b.reap()
	cur := b.claimOne()
	wantLost(t, "late Complete of a lease claimed again since", b.completeLate(store.Completion{Lease: old.Lease})[0])
	b.wantState(cur.MessageID, store.Processing)
	if ext, err := b.s.Extend(b.ctx, []store.Lease{cur.Lease}, lease); err != nil || len(ext.Lost) != 0 {
		t.Fatalf("Extend of the current lease = %+v, %v", ext, err)
	}
	b.mustComplete(cur.Lease)
	wantLost(t, "late Complete of a lease completed by another", b.completeLate(store.Completion{Lease: old.Lease})[0])

	b.send("dead")
	dead := b.claimOne()
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: dead.Lease, Permanent: true}); err != nil {
		t.Fatal(err)
	}
	wantLost(t, "late Complete of a dead message", b.completeLate(store.Completion{Lease: dead.Lease})[0])
	b.wantState(dead.MessageID, store.Dead)

	b.send("cancelled")
	cancelled := b.claimOne()
	if _, err := b.s.Cancel(b.ctx, b.queue, []int64{cancelled.MessageID}); err != nil {
		t.Fatal(err)
	}
	wantLost(t, "late Complete of a cancelled message", b.completeLate(store.Completion{Lease: cancelled.Lease})[0])
	b.wantState(cancelled.MessageID, store.Cancelled)

	k := b.enqueue(keyed("K", 2)...)
	run := b.claimRuns(2)
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: run[0].Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	wantLost(t, "late Complete of a message waiting behind its key", b.completeLate(store.Completion{Lease: run[1].Lease})[0])
	b.wantState(k[1], store.Waiting)

	never := b.send("never claimed")
	wantLost(t, "late Complete of a message never claimed, under token 0", b.completeLate(store.Completion{Lease: store.Lease{MessageID: never}})[0])
	if err := b.s.Release(b.ctx, store.Release{Lease: store.Lease{MessageID: never}, Late: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late Release of a message never claimed, under token 0 = %v, want ErrLeaseLost", err)
	}
	b.wantState(never, store.Pending)
}

// A late completion of a key's head that was given back lets the key's
// next message go.
func testLateCompletionOfAHead(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(keyed("K", 2)...)
	d := b.claimOne()
	b.clk.Advance(lease)
	b.reap()
	b.mustCompleteLate(d.Lease)
	sameIDs(t, "the next of the key", ids(b.claim(10)), k[1:])
}

// A late release gives the message back, visible after its delay, while
// no claim has taken it since: after its lease expired, or when it is
// pending under the lease already (its visibility changes again). Its
// delivery stays counted, and it is not dead-lettered on its last one.
// Once another claim has taken the message, it is refused.
func testLateRelease(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("m"), MaxDeliveries: 1})[0]
	d := b.claimOne()
	b.clk.Advance(lease)
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Delay: time.Minute, Late: true}); err != nil {
		t.Fatalf("late Release of an expired lease: %v", err)
	}
	b.wantState(id, store.Pending)
	b.wantDeliveries(id, 1)
	b.clk.Advance(30 * time.Second)
	b.claimNone()
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Delay: 2 * time.Minute, Late: true}); err != nil {
		t.Fatalf("late Release of a message pending under the lease: %v", err)
	}
	b.clk.Advance(time.Minute)
	b.claimNone()
	b.clk.Advance(time.Minute)
	again := b.claimOne()
	err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Late: true})
	wantLost(t, "late Release of a lease claimed again since", err)
	b.wantState(id, store.Processing)
	b.mustComplete(again.Lease)
}
