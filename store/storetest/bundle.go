package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
)

// lease is the lease duration tests use unless they need another.
const lease = 30 * time.Second

type bundle struct {
	t     *testing.T
	ctx   context.Context
	clk   *clocktest.Clock
	s     store.Store
	queue string
}

func setup(t *testing.T, f Factory) *bundle {
	t.Helper()
	t.Parallel()
	clk := clocktest.New()
	return &bundle{t: t, ctx: context.Background(), clk: clk, s: f(t, clk), queue: "q"}
}

func (b *bundle) enqueue(msgs ...store.NewMessage) []int64 {
	b.t.Helper()
	for i := range msgs {
		if msgs[i].Queue == "" {
			msgs[i].Queue = b.queue
		}
	}
	res, err := b.s.Enqueue(b.ctx, msgs)
	if err != nil {
		b.t.Fatalf("Enqueue: %v", err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func (b *bundle) send(payload string) int64 {
	b.t.Helper()
	return b.enqueue(store.NewMessage{Payload: []byte(payload)})[0]
}

func (b *bundle) claim(max int) []store.Delivery {
	b.t.Helper()
	return b.claimFor(max, lease)
}

func (b *bundle) claimFor(max int, d time.Duration) []store.Delivery {
	b.t.Helper()
	ds, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: "w1", Max: max, LeaseDuration: d})
	if err != nil {
		b.t.Fatalf("Claim: %v", err)
	}
	return ds
}

func (b *bundle) claimOne() store.Delivery {
	b.t.Helper()
	ds := b.claim(1)
	if len(ds) != 1 {
		b.t.Fatalf("claimed %d messages, want 1", len(ds))
	}
	return ds[0]
}

func (b *bundle) claimNone() {
	b.t.Helper()
	if ds := b.claim(100); len(ds) != 0 {
		b.t.Fatalf("claimed %d messages (first id %d), want none", len(ds), ds[0].MessageID)
	}
}

func (b *bundle) complete(l store.Lease) error {
	b.t.Helper()
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: l}})
	if err != nil {
		b.t.Fatalf("Complete: %v", err)
	}
	return errs[0]
}

func (b *bundle) mustComplete(l store.Lease) {
	b.t.Helper()
	if err := b.complete(l); err != nil {
		b.t.Fatalf("Complete(%s): %v", l, err)
	}
}

func (b *bundle) stats() store.Stats {
	b.t.Helper()
	return b.statsOf(b.queue)
}

func (b *bundle) info(id int64) store.Info {
	b.t.Helper()
	for st := range store.State(store.States) {
		after := int64(0)
		for {
			infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: st, AfterID: after, Limit: 1000})
			if err != nil {
				b.t.Fatalf("List: %v", err)
			}
			for _, in := range infos {
				if in.ID == id {
					return in
				}
			}
			if len(infos) < 1000 {
				break
			}
			after = infos[len(infos)-1].ID
		}
	}
	b.t.Fatalf("message %d not listed in any state", id)
	return store.Info{}
}

func (b *bundle) wantState(id int64, want store.State) store.Info {
	b.t.Helper()
	in := b.info(id)
	if in.State != want {
		b.t.Fatalf("message %d is %s, want %s", id, in.State, want)
	}
	return in
}

func (b *bundle) reap() []store.Recovered {
	b.t.Helper()
	rs, err := b.s.Reap(b.ctx)
	if err != nil {
		b.t.Fatalf("Reap: %v", err)
	}
	return rs
}

func wantLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("%s = %v, want ErrLeaseLost", what, err)
	}
}

func ids(ds []store.Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.MessageID
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got ids %v, want %v", what, got, want)
	}
}
