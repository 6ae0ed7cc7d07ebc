package worklease_test

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/worklease"
)

// record is an entry of an ordered log: the tenant it belongs to and its
// offset in that tenant's stream.
type record struct {
	tenant string
	offset int64
}

// An orchestrator consumes an ordered log that interleaves several
// tenants' streams and, after a reconnect, delivers some records again.
// The log keeps the records; worklease keeps, per tenant, the one record in
// flight, the ones that arrived behind it, in order, and the ones already
// finished. The orchestrator decides when a failed record runs again (its
// own backoff, 1 s then 2 s, on its own clock) and moves a tenant on to the
// record its lease hints at. A failing record holds back its tenant only.
func Example_orderedLog() {
	clk := clocktest.New()
	start := clk.Now()
	leases, err := worklease.New(worklease.Config{MaxRetries: 2, Clock: clk})
	if err != nil {
		panic(err)
	}
	say := func(format string, args ...any) {
		fmt.Printf("at %s: "+format+"\n", append([]any{clk.Now().Sub(start)}, args...)...)
	}
	// The work itself: acme's record 2 fails twice, bolt's record 2 always.
	tries := map[record]int{}
	handle := func(r record) error {
		tries[r]++
		if r == (record{"acme", 2}) && tries[r] <= 2 || r == (record{"bolt", 2}) {
			return errors.New("downstream unavailable")
		}
		return nil
	}
	type retry struct {
		tenant string
		at     time.Time
	}
	var retries []retry

	// work runs the tenant's leased record, then each record its lease
	// hands on to, until one fails and must wait or none is left. A real
	// orchestrator runs tenants concurrently; here one goroutine keeps the
	// output in order.
	work := func(tenant string) {
		for {
			l, _ := leases.Lease(tenant)
			var next int64
			if err := handle(record{tenant, l.Offset}); err == nil {
				s, _ := leases.Succeed(tenant, l.Token)
				say("%s %d done", tenant, l.Offset)
				if s.Code == worklease.NoBacklog {
					return
				}
				next = s.Next
			} else {
				f, _ := leases.Fail(tenant, l.Token)
				if f.Code == worklease.RetryScheduled {
					delay := time.Second << (f.RetryCount - 1)
					retries = append(retries, retry{tenant, clk.Now().Add(delay)})
					say("%s %d failed (%v), retry %d in %s", tenant, l.Offset, err, f.RetryCount, delay)
					return
				}
				say("%s %d given up after %d retries, %s after it was acquired", tenant, l.Offset, l.RetryCount, clk.Now().Sub(l.AcquiredAt))
				if f.Code == worklease.GiveUpNoBacklog {
					return
				}
				next = f.Next
			}
			if r, err := leases.TryAcquire(tenant, next); err != nil || r.Code != worklease.Acquired {
				panic(fmt.Sprint(r.Code, err))
			}
		}
	}

	for _, r := range []record{{"acme", 1}, {"bolt", 1}, {"acme", 2}, {"bolt", 2},
		{"acme", 3}, {"bolt", 3}, {"acme", 1}, {"acme", 4}} {
		res, err := leases.TryAcquire(r.tenant, r.offset)
		if err != nil {
			panic(err)
		}
		if res.Code == worklease.Acquired {
			work(r.tenant)
		} else {
			say("%s %d %s", r.tenant, r.offset, res.Code)
		}
	}
	// The log is read; the failed records run again when their time comes.
	for len(retries) > 0 {
		slices.SortStableFunc(retries, func(a, b retry) int { return a.at.Compare(b.at) })
		r := retries[0]
		retries = retries[1:]
		clk.Advance(r.at.Sub(clk.Now()))
		work(r.tenant)
	}
	again, _ := leases.TryAcquire("bolt", 2)
	say("bolt 2 delivered again: %s", again.Code)
	// Output:
	// at 0s: acme 1 done
	// at 0s: bolt 1 done
	// at 0s: acme 2 failed (downstream unavailable), retry 1 in 1s
	// at 0s: bolt 2 failed (downstream unavailable), retry 1 in 1s
	// at 0s: acme 3 Enqueued
	// at 0s: bolt 3 Enqueued
	// at 0s: acme 1 AlreadyProcessed
	// at 0s: acme 4 Enqueued
	// at 1s: acme 2 failed (downstream unavailable), retry 2 in 2s
	// at 1s: bolt 2 failed (downstream unavailable), retry 2 in 2s
	// at 3s: acme 2 done
	// at 3s: acme 3 done
	// at 3s: acme 4 done
	// at 3s: bolt 2 given up after 2 retries, 3s after it was acquired
	// at 3s: bolt 3 done
	// at 3s: bolt 2 delivered again: AlreadyFailed
}
