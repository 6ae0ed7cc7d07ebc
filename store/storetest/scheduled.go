package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// Scheduled lists a queue's pending messages that are not visible yet,
// whatever made them so (a delay, a retry's backoff, a release's delay),
// the soonest first across priorities, page by page; a message once
// visible, one waiting behind its key and another queue's are not
// listed.
func testScheduled(t *testing.T, f Factory) {
	b := setup(t, f)
	ctx := b.ctx
	retried := b.send("retried")
	snoozed := b.send("snoozed")
	ds := b.claim(2)
	if _, err := b.s.Fail(ctx, store.Failure{Lease: ds[0].Lease, Error: "boom", RetryDelay: 4 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Release(ctx, store.Release{Lease: ds[1].Lease, Delay: 30 * time.Second, Uncount: true}); err != nil {
		t.Fatal(err)
	}
	ids := b.enqueue(
		store.NewMessage{Payload: []byte("a"), Delay: 5 * time.Minute},
		store.NewMessage{Payload: []byte("b"), Delay: time.Minute, Priority: 5},
		store.NewMessage{Payload: []byte("c"), Delay: 3 * time.Minute, Priority: -2},
		store.NewMessage{Payload: []byte("now")},
		store.NewMessage{Payload: []byte("e"), Delay: 2 * time.Minute, Key: "k"},
		store.NewMessage{Payload: []byte("behind"), Delay: time.Second, Key: "k"},
		store.NewMessage{Payload: []byte("same time"), Delay: 3 * time.Minute},
		store.NewMessage{Queue: "other", Payload: []byte("elsewhere"), Delay: time.Minute},
	)
	a, bb, c, e, same := ids[0], ids[1], ids[2], ids[4], ids[6]
	want := []int64{snoozed, bb, e, c, same, retried, a}
	if got := b.scheduledIDs(store.ScheduledAfter{}, 0); !slices.Equal(got, want) {
		t.Fatalf("Scheduled = %v, want %v", got, want)
	}
	// Page by page, three at a time.
	var paged []int64
	var after store.ScheduledAfter
	for {
		page, err := b.s.Scheduled(ctx, b.queue, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page {
			if in.State != store.Pending || !in.VisibleAt.After(b.clk.Now()) {
				t.Fatalf("Scheduled listed message %d, %s, visible at %s: want pending and not visible yet", in.ID, in.State, in.VisibleAt)
			}
			paged = append(paged, in.ID)
		}
		if len(page) < 3 {
			break
		}
		last := page[len(page)-1]
		after = store.ScheduledAfter{VisibleAt: last.VisibleAt, ID: last.ID}
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("Scheduled page by page = %v, want %v", paged, want)
	}
	// Once visible, a message leaves the list.
	b.clk.Advance(90 * time.Second)
	if got := b.scheduledIDs(store.ScheduledAfter{}, 0); !slices.Equal(got, want[2:]) {
		t.Fatalf("Scheduled 90s on = %v, want %v", got, want[2:])
	}
	if got := b.scheduledIDs(store.ScheduledAfter{}, 2); !slices.Equal(got, want[2:4]) {
		t.Fatalf("Scheduled with a limit of 2 = %v, want %v", got, want[2:4])
	}
	for _, bad := range []struct {
		queue string
		after store.ScheduledAfter
		limit int
	}{{"", store.ScheduledAfter{}, 0}, {b.queue, store.ScheduledAfter{ID: -1}, 0}, {b.queue, store.ScheduledAfter{}, store.MaxBatch + 1}} {
		if _, err := b.s.Scheduled(ctx, bad.queue, bad.after, bad.limit); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Scheduled(%q, %+v, %d): %v, want ErrInvalid", bad.queue, bad.after, bad.limit, err)
		}
	}
	if got, err := b.s.Scheduled(ctx, "none", store.ScheduledAfter{}, 0); err != nil || len(got) != 0 {
		t.Fatalf("Scheduled of an unknown queue = %v, %v; want none", got, err)
	}
}

func (b *bundle) scheduledIDs(after store.ScheduledAfter, limit int) []int64 {
	b.t.Helper()
	infos, err := b.s.Scheduled(b.ctx, b.queue, after, limit)
	if err != nil {
		b.t.Fatalf("Scheduled: %v", err)
	}
	ids := make([]int64, len(infos))
	for i, in := range infos {
		ids[i] = in.ID
	}
	return ids
}
