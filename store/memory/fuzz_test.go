package memory_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
)

// FuzzOperations runs a sequence of store operations, two bytes each (an
// operation and its argument), and checks the store's invariants after
// every one: a lease that is not its message's latest is refused; no key
// has two messages in flight; a key's messages finish in enqueue order;
// deliveries never exceed the budget; every message is counted in exactly
// one state.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 2, 2, 0, 2, 1})
	f.Add([]byte{0, 1, 1, 0, 6, 3, 7, 0, 1, 0, 2, 0, 2, 1})
	f.Add([]byte{0, 4, 0, 4, 1, 1, 3, 8, 1, 1, 3, 0, 1, 1, 5, 0, 6, 2, 7, 0})
	f.Add([]byte{0, 3, 0, 3, 1, 2, 4, 0, 1, 2, 2, 1, 2, 2, 6, 1, 5, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		ctx := context.Background()
		clk := clocktest.New()
		s := openMemory(t, clk)
		const q = "q"
		var (
			leases    []store.Lease
			latest    = map[int64]int64{}  // message -> latest fencing token
			key       = map[int64]string{} // message -> key
			open      = map[string][]int64{}
			enqueued  int64
			budget    = map[int64]int{}
			delivered = map[int64]int{}
		)
		finish := func(id int64) {
			k := key[id]
			open[k] = slices.DeleteFunc(open[k], func(x int64) bool { return x == id })
		}
		pick := func(arg byte) (store.Lease, bool) {
			if len(leases) == 0 {
				return store.Lease{}, false
			}
			return leases[int(arg)%len(leases)], true
		}
		// checkLease verifies the fencing rule for a lease operation's
		// result and reports whether it succeeded.
		checkLease := func(op string, l store.Lease, err error) bool {
			if err != nil {
				if !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("%s %v: %v", op, l, err)
				}
				return false
			}
			if latest[l.MessageID] != l.FencingToken {
				t.Fatalf("%s with stale %v succeeded; latest token is %d", op, l, latest[l.MessageID])
			}
			return true
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, ops[i+1]
			switch op {
			case 0:
				m := store.NewMessage{Queue: q, MaxDeliveries: 1 + int(arg%3)}
				if arg%4 != 3 {
					m.Key = string(rune('a' + arg%3))
				}
				res, err := s.Enqueue(ctx, []store.NewMessage{m})
				if err != nil {
					t.Fatal(err)
				}
				id := res[0].ID
				enqueued++
				key[id], budget[id] = m.Key, m.MaxDeliveries
				if m.Key != "" {
					open[m.Key] = append(open[m.Key], id)
				}
			case 1:
				ds, err := s.Claim(ctx, store.Claim{Queue: q, WorkerID: "w", Max: 1 + int(arg%3), LeaseDuration: time.Duration(1+arg%3) * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					if d.FencingToken <= latest[d.MessageID] {
						t.Fatalf("claim of %d minted token %d, not above %d", d.MessageID, d.FencingToken, latest[d.MessageID])
					}
					latest[d.MessageID] = d.FencingToken
					delivered[d.MessageID] = d.Attempt
					if d.Attempt > budget[d.MessageID] {
						t.Fatalf("message %d delivered %d times, budget %d", d.MessageID, d.Attempt, budget[d.MessageID])
					}
					if k := d.Key; k != "" && open[k][0] != d.MessageID {
						t.Fatalf("claimed %d of key %q before %d", d.MessageID, k, open[k][0])
					}
					leases = append(leases, d.Lease)
				}
			case 2:
				if l, ok := pick(arg); ok {
					errs, err := s.Complete(ctx, []store.Completion{{Lease: l}})
					if err != nil {
						t.Fatal(err)
					}
					if checkLease("complete", l, errs[0]) {
						if k := key[l.MessageID]; k != "" && open[k][0] != l.MessageID {
							t.Fatalf("completed %d of key %q before %d", l.MessageID, k, open[k][0])
						}
						finish(l.MessageID)
					}
				}
			case 3:
				if l, ok := pick(arg); ok {
					dead, err := s.Fail(ctx, store.Failure{Lease: l, Error: "x", Permanent: arg&8 != 0})
					if checkLease("fail", l, err) && dead {
						if arg&8 == 0 && delivered[l.MessageID] < budget[l.MessageID] {
							t.Fatalf("message %d dead after %d of %d deliveries", l.MessageID, delivered[l.MessageID], budget[l.MessageID])
						}
						finish(l.MessageID)
					}
				}
			case 4:
				if l, ok := pick(arg); ok {
					uncount := arg&1 == 1
					if checkLease("release", l, s.Release(ctx, store.Release{Lease: l, Uncount: uncount})) {
						switch {
						case uncount:
							delivered[l.MessageID]--
						case delivered[l.MessageID] >= budget[l.MessageID]:
							finish(l.MessageID) // released on its last delivery: dead
						}
					}
				}
			case 5:
				if l, ok := pick(arg); ok {
					res, err := s.Extend(ctx, []store.Lease{l}, 2*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					var lost error
					if len(res.Lost) > 0 {
						lost = store.LeaseLost(l)
					}
					checkLease("extend", l, lost)
				}
			case 6:
				clk.Advance(time.Duration(arg%4) * time.Second)
			case 7:
				rec, err := s.Reap(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rec {
					if r.Dead {
						finish(r.ID)
					}
				}
			}
			st, err := s.Stats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if sum := st.Pending + st.Waiting + st.Processing + st.Completed + st.Dead; sum != enqueued {
				t.Fatalf("after op %d: states count %d messages, %d were enqueued: %+v", i/2, sum, enqueued, st)
			}
			inFlight := map[string]int{}
			infos, err := s.List(ctx, store.ListFilter{Queue: q, State: store.Processing, Limit: store.MaxBatch})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				if in.Key != "" {
					if inFlight[in.Key]++; inFlight[in.Key] > 1 {
						t.Fatalf("after op %d: key %q has two messages in flight", i/2, in.Key)
					}
				}
			}
		}
	})
}
