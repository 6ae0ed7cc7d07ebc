package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
)

// FuzzIndependentRuns runs claims with independent leases, releases,
// completions, extensions and reaps, two bytes each, and checks after
// every one: a lease holds its message exactly while it was not released
// or completed and has not expired, whatever happened to the other
// messages of its run; and a claim gives out a message only when every
// earlier message of its key is completed or given out before it in the
// same claim.
func FuzzIndependentRuns(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 3, 2, 0, 1, 3, 2, 1, 3, 0, 1, 3})
	f.Add([]byte{0, 0, 0, 1, 0, 0, 1, 3, 4, 1, 5, 12, 1, 3, 5, 25, 1, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		ctx := context.Background()
		clk := clocktest.New()
		s := openMemory(t, clk)
		type held struct {
			lease   store.Lease
			expires time.Time
			done    bool
		}
		var (
			leases    []*held
			key       = map[int64]string{}
			completed = map[int64]bool{}
			ids       []int64
		)
		current := func(h *held) bool { return !h.done && clk.Now().Before(h.expires) }
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, ops[i+1]
			var h *held
			if len(leases) > 0 {
				h = leases[int(arg)%len(leases)]
			}
			switch op {
			case 0:
				k := string(rune('a' + arg%2))
				res, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Key: k, MaxDeliveries: store.MaxDeliveriesLimit}})
				if err != nil {
					t.Fatal(err)
				}
				key[res[0].ID] = k
				ids = append(ids, res[0].ID)
			case 1:
				ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: int(arg%4) + 1, LeaseDuration: 10 * time.Second,
					Runs: true, Independent: true})
				if err != nil {
					t.Fatal(err)
				}
				given := map[int64]bool{}
				for _, d := range ds {
					for _, id := range ids {
						if id < d.MessageID && key[id] == d.Key && !completed[id] && !given[id] {
							t.Fatalf("message %d of key %s given out while %d before it is neither completed nor in the claim", d.MessageID, d.Key, id)
						}
					}
					given[d.MessageID] = true
					leases = append(leases, &held{lease: d.Lease, expires: d.LeaseExpires})
				}
			case 2, 3:
				if h == nil {
					continue
				}
				want := current(h)
				var err error
				if op == 2 {
					err = s.Release(ctx, store.Release{Lease: h.lease})
				} else {
					var errs []error
					if errs, err = s.Complete(ctx, []store.Completion{{Lease: h.lease}}); err == nil {
						err = errs[0]
					}
				}
				if err != nil && !errors.Is(err, store.ErrLeaseLost) {
					t.Fatal(err)
				}
				if (err == nil) != want {
					t.Fatalf("op %d of %v: %v, want the lease current: %v", op, h.lease, err, want)
				}
				if err == nil {
					h.done = true
					completed[h.lease.MessageID] = completed[h.lease.MessageID] || op == 3
				}
			case 4:
				if h == nil {
					continue
				}
				want := current(h)
				ext, err := s.Extend(ctx, []store.Lease{h.lease}, 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if (len(ext.Lost) == 0) != want {
					t.Fatalf("Extend of %v lost %v, want the lease current: %v", h.lease, ext.Lost, want)
				}
				if want {
					h.expires = ext.Expires
				}
			case 5:
				clk.Advance(time.Duration(arg%20) * time.Second)
				if _, err := s.Reap(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
