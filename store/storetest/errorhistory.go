package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// A message's error history holds an entry for each error recorded as
// its last: failures, counted releases, expired leases and the error that
// dead-letters it, each with its attempt, time and worker; the newest
// store.MaxErrors are kept, through a redrive. Get gives it, List does
// not, and a completion adds nothing.
func testErrorHistory(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 40})[0]
	var want []store.AttemptError
	note := func(attempt int, text string) {
		want = append(want, store.AttemptError{Attempt: attempt, At: b.clk.Now(), WorkerID: "w1", Error: text})
		if len(want) > store.MaxErrors {
			want = want[1:]
		}
	}
	attempt := 0
	for i := range store.MaxErrors + 2 {
		d := b.claimOne()
		attempt++
		b.clk.Advance(time.Second)
		text := fmt.Sprintf("boom %d", i+1)
		if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: text}); err != nil {
			t.Fatal(err)
		}
		note(attempt, text)
	}
	d := b.claimOne()
	attempt++
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
		t.Fatal(err)
	}
	note(attempt, store.ReleasedError)
	b.claimFor(1, time.Minute)
	attempt++
	b.clk.Advance(2 * time.Minute)
	b.reap()
	note(attempt, "lease expired")
	d = b.claimOne()
	attempt++
	b.mustComplete(d.Lease)
	b.wantErrors(id, want)

	// Dead-lettered, then redriven: the history goes on.
	dead := b.enqueue(store.NewMessage{Payload: []byte("y")})[0]
	for _, text := range []string{"first", "for good"} {
		d := b.claimOne()
		if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: text, Permanent: text == "for good"}); err != nil {
			t.Fatal(err)
		}
	}
	at := b.clk.Now()
	deadWant := []store.AttemptError{{Attempt: 1, At: at, WorkerID: "w1", Error: "first"}, {Attempt: 2, At: at, WorkerID: "w1", Error: "for good"}}
	b.wantErrors(dead, deadWant)
	if n, err := b.s.Redrive(b.ctx, b.queue, []int64{dead}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	b.wantErrors(dead, deadWant)
	for _, in := range b.list(store.Pending) {
		if in.Errors != nil {
			t.Fatalf("List gave message %d an error history: %+v", in.ID, in.Errors)
		}
	}
}

func (b *bundle) wantErrors(id int64, want []store.AttemptError) {
	b.t.Helper()
	got := b.get(id).Errors
	if len(got) != len(want) {
		b.t.Fatalf("message %d has %d errors in its history, want %d:\n got %+v\nwant %+v", id, len(got), len(want), got, want)
	}
	for i := range got {
		if got[i].Attempt != want[i].Attempt || !got[i].At.Equal(want[i].At) || got[i].WorkerID != want[i].WorkerID || got[i].Error != want[i].Error {
			b.t.Fatalf("message %d's error %d of %d: %+v, want %+v\nall: %+v", id, i+1, len(got), got[i], want[i], got)
		}
	}
}
