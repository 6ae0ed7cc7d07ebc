package storetest

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold/store"
)

func (b *bundle) killOne(id int64) {
	b.t.Helper()
	d := b.claimOne()
	if d.MessageID != id {
		b.t.Fatalf("claimed %d, want %d", d.MessageID, id)
	}
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "fatal", Permanent: true}); err != nil || !dead {
		b.t.Fatalf("Fail = %v, %v", dead, err)
	}
}

func testRedriveAndPurge(t *testing.T, f Factory) {
	b := setup(t, f)
	a, c, keep := b.send("a"), b.send("c"), b.send("keep")
	b.killOne(a)
	b.killOne(c)
	live := b.claimOne()
	if live.MessageID != keep {
		t.Fatalf("claimed %d", live.MessageID)
	}

	// Ids that are not dead letters of the queue: an error, nothing moved.
	for _, bad := range [][]int64{{keep}, {a, 999999}} {
		if _, err := b.s.Redrive(b.ctx, b.queue, bad); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Redrive(%v) = %v, want ErrNotFound", bad, err)
		}
		if _, err := b.s.Purge(b.ctx, b.queue, bad); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Purge(%v) = %v, want ErrNotFound", bad, err)
		}
	}
	if _, err := b.s.Redrive(b.ctx, b.queue, []int64{a, a}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Redrive with an id listed twice = %v, want ErrInvalid", err)
	}
	if _, err := b.s.Purge(b.ctx, b.queue, []int64{c, c}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Purge with an id listed twice = %v, want ErrInvalid", err)
	}
	if st := b.stats(); st.Dead != 2 || st.Processing != 1 {
		t.Fatalf("stats after refused calls %+v", st)
	}

	n, err := b.s.Redrive(b.ctx, b.queue, []int64{a})
	if err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	if in := b.wantState(a, store.Pending); in.Deliveries != 0 {
		t.Fatalf("redriven message has %d deliveries, want a fresh budget", in.Deliveries)
	}
	if d := b.claimOne(); d.MessageID != a || d.Attempt != 1 {
		t.Fatalf("claimed %+v after redrive", d)
	}
	n, err = b.s.Purge(b.ctx, b.queue, nil)
	if err != nil || n != 1 {
		t.Fatalf("Purge all = %d, %v", n, err)
	}
	if st := b.stats(); st.Dead != 0 || st.Processing != 2 {
		t.Fatalf("stats after purge %+v", st)
	}
	if dls, _ := store.ListDeadLetters(b.ctx, b.s, b.queue, 0, 10); len(dls) != 0 {
		t.Fatalf("dead letters after purge: %+v", dls)
	}
}
