package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/store"
)

func testFailRetriesThenDeadLetters(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 2})[0]
	d := b.claimOne()
	dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "first", RetryDelay: 10 * time.Second})
	if err != nil || dead {
		t.Fatalf("Fail = %v, %v; want a retry", dead, err)
	}
	in := b.wantState(id, store.Pending)
	if in.LastError != "first" || !in.VisibleAt.Equal(b.clk.Now().Add(10*time.Second)) {
		t.Fatalf("after a failure: %+v", in)
	}
	b.claimNone()
	b.clk.Advance(10 * time.Second)
	d = b.claimOne()
	dead, err = b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "second"})
	if err != nil || !dead {
		t.Fatalf("Fail on the last delivery = %v, %v; want dead", dead, err)
	}
	in = b.wantState(id, store.Dead)
	if in.DeadReason != store.ReasonMaxDeliveries || in.LastError != "second" {
		t.Fatalf("dead letter %+v", in)
	}
	dls, err := store.ListDeadLetters(b.ctx, b.s, b.queue, 0, 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("DeadLetters = %+v, %v", dls, err)
	}
	dl := dls[0]
	if dl.ID != id || dl.Reason != store.ReasonMaxDeliveries || dl.LastError != "second" || !dl.DeadAt.Equal(b.clk.Now()) ||
		string(dl.Payload) != "x" || dl.Deliveries != 2 {
		t.Fatalf("dead letter %+v", dl)
	}

	// A long error text is kept, cut to its end.
	b.send("y")
	d = b.claimOne()
	long := strings.Repeat("a", store.MaxErrorLength) + "the end"
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: long}); err != nil {
		t.Fatal(err)
	}
	if in := b.info(d.MessageID); len(in.LastError) != store.MaxErrorLength || !strings.HasSuffix(in.LastError, "the end") {
		t.Fatalf("recorded error of %d bytes ending %q", len(in.LastError), in.LastError[max(0, len(in.LastError)-10):])
	}
}

// A failure's reply is sent when, and only when, the failure dead-letters
// the message, in the same transaction; an invalid one changes nothing.
func testFailWithReply(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("req"), Key: "k", ReplyTo: "replies", MaxDeliveries: 2})[0]
	next := b.enqueue(store.NewMessage{Payload: []byte("next"), Key: "k"})[0]
	reply := func(s string) *store.NewMessage { return &store.NewMessage{Queue: "replies", Payload: []byte(s)} }
	d := b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "first", Reply: reply("not sent")}); err != nil || dead {
		t.Fatalf("first Fail = %v, %v", dead, err)
	}
	if st, err := b.s.Stats(b.ctx, "replies"); err != nil || st.Pending != 0 {
		t.Fatalf("a retried failure sent its reply: %+v, %v", st, err)
	}
	d = b.claimOne()
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "bad", Reply: &store.NewMessage{Queue: ""}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Fail with an invalid reply = %v", err)
	}
	b.wantState(id, store.Processing)
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "second", Reply: reply("sent")}); err != nil || !dead {
		t.Fatalf("last Fail = %v, %v", dead, err)
	}
	if in := b.wantState(id, store.Dead); in.LastError != "second" {
		t.Fatalf("dead request %+v", in)
	}
	rs, err := b.s.Claim(b.ctx, store.Claim{Queue: "replies", WorkerID: "w", Max: 10, LeaseDuration: lease})
	if err != nil || len(rs) != 1 || string(rs[0].Payload) != "sent" {
		t.Fatalf("reply claim = %+v, %v", rs, err)
	}
	// The key's next message moved up as with any dead head.
	if d := b.claimOne(); d.MessageID != next {
		t.Fatalf("claimed %d after the dead head, want %d", d.MessageID, next)
	}
}

func testPermanentFailure(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	d := b.claimOne()
	dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "bad input", Permanent: true})
	if err != nil || !dead {
		t.Fatalf("permanent Fail = %v, %v", dead, err)
	}
	if in := b.wantState(id, store.Dead); in.DeadReason != store.ReasonPermanent || in.Deliveries != 1 {
		t.Fatalf("dead letter %+v", in)
	}
	b.send("y")
	d = b.claimOne()
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Permanent: true, Reason: store.ReasonMaxProcessingTime}); err != nil {
		t.Fatal(err)
	}
	if in := b.info(d.MessageID); in.DeadReason != store.ReasonMaxProcessingTime {
		t.Fatalf("reason %q, want the one given", in.DeadReason)
	}
}

func testReleaseAndUncount(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	d := b.claimOne()
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Delay: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(id, store.Pending); in.Deliveries != 1 {
		t.Fatalf("a counted release left %d deliveries, want 1", in.Deliveries)
	}
	b.claimNone()
	b.clk.Advance(5 * time.Second)
	d = b.claimOne()
	if d.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", d.Attempt)
	}
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Uncount: true}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(id, store.Pending); in.Deliveries != 1 {
		t.Fatalf("an uncounted release left %d deliveries, want 1", in.Deliveries)
	}
	if d := b.claimOne(); d.Attempt != 2 {
		t.Fatalf("attempt after an uncounted release %d, want 2", d.Attempt)
	}
}

// A release marked a snooze is counted as one, on Get only; other
// releases are not.
func testSnoozesCounted(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	for _, r := range []store.Release{{Uncount: true, Snooze: true}, {Uncount: true}, {Uncount: true, Snooze: true, Delay: time.Second}, {}} {
		d := b.claimOne()
		r.Lease = d.Lease
		if err := b.s.Release(b.ctx, r); err != nil {
			t.Fatal(err)
		}
		b.clk.Advance(time.Second)
	}
	d := b.claimOne()
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Snooze: true}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a counted snooze: %v, want ErrInvalid", err)
	}
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
		t.Fatal(err)
	}
	in, err := b.s.Get(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if in.Snoozes != 2 || in.Deliveries != 2 {
		t.Fatalf("after two snoozes, an uncounted and two counted releases: %d snoozes, %d deliveries; want 2 and 2", in.Snoozes, in.Deliveries)
	}
	infos, err := b.s.List(b.ctx, store.ListFilter{Queue: in.Queue, State: store.Pending, Limit: 10})
	if err != nil || len(infos) != 1 || infos[0].Snoozes != 0 {
		t.Fatalf("List = %+v, %v; want the message with no snooze count", infos, err)
	}
}

func testCountedReleaseUsesTheBudget(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.enqueue(store.NewMessage{MaxDeliveries: 2, Key: "k"}, store.NewMessage{Key: "k"})
	d := b.claimOne()
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(ids[0], store.Pending); in.LastError != store.ReleasedError {
		t.Fatalf("last error after a counted release %q, want %q", in.LastError, store.ReleasedError)
	}
	d = b.claimOne()
	if d.MessageID != ids[0] || d.Attempt != 2 {
		t.Fatalf("claimed %d attempt %d, want %d attempt 2", d.MessageID, d.Attempt, ids[0])
	}
	// Released on its last delivery: dead, and the key moves on.
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(ids[0], store.Dead); in.DeadReason != store.ReasonMaxDeliveries || in.Deliveries != 2 {
		t.Fatalf("released on its last delivery: %s after %d deliveries", in.DeadReason, in.Deliveries)
	}
	if d := b.claimOne(); d.MessageID != ids[1] {
		t.Fatalf("claimed %d, want the next of the key, %d", d.MessageID, ids[1])
	}
}

func testAnyErrorTextIsRecorded(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	d := b.claimOne()
	text := "bad \xff byte, a NUL \x00 and " + strings.Repeat("é", 3000)
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: text}); err != nil {
		t.Fatalf("Fail with an arbitrary error text: %v", err)
	}
	in := b.wantState(id, store.Pending)
	if !utf8.ValidString(in.LastError) || strings.ContainsRune(in.LastError, 0) || len(in.LastError) > store.MaxErrorLength {
		t.Fatalf("recorded error is not clean UTF-8 within %d bytes: %d bytes", store.MaxErrorLength, len(in.LastError))
	}
	if !strings.HasSuffix(in.LastError, "éé") {
		t.Fatal("the error's tail was not kept")
	}
}
