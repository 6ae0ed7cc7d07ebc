package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

func testReaper(t *testing.T, f Factory) {
	b := setup(t, f)
	short := b.send("short")
	long := b.send("long")
	b.claimFor(1, 10*time.Second)
	b.claimFor(1, time.Minute)
	if rs := b.reap(); len(rs) != 0 {
		t.Fatalf("reap before expiry = %+v", rs)
	}
	b.clk.Advance(15 * time.Second)
	rs := b.reap()
	if len(rs) != 1 || rs[0].ID != short || rs[0].Dead || rs[0].Queue != b.queue || rs[0].StuckFor != 5*time.Second {
		t.Fatalf("reap = %+v, want message %d stuck for 5s", rs, short)
	}
	if rs := b.reap(); len(rs) != 0 {
		t.Fatalf("second reap = %+v, want nothing (idempotent)", rs)
	}
	b.wantState(short, store.Pending)
	b.wantState(long, store.Processing)
	if d := b.claimOne(); d.MessageID != short || d.Attempt != 2 {
		t.Fatalf("reclaimed %+v", d)
	}
}

func testConcurrentReapers(t *testing.T, f Factory) {
	b := setup(t, f)
	const n = 50
	for i := 0; i < n; i++ {
		b.send(fmt.Sprint(i))
	}
	if got := len(b.claimFor(n, time.Second)); got != n {
		t.Fatalf("claimed %d", got)
	}
	b.clk.Advance(time.Second)
	var wg sync.WaitGroup
	results := make([][]store.Recovered, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = b.s.Reap(b.ctx)
		}()
	}
	wg.Wait()
	seen := map[int64]int{}
	for i, rs := range results {
		if errs[i] != nil {
			t.Fatalf("reaper %d: %v", i, errs[i])
		}
		for _, r := range rs {
			seen[r.ID]++
		}
	}
	if len(seen) != n {
		t.Fatalf("reapers recovered %d distinct messages, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("message %d recovered %d times", id, c)
		}
	}
	if st := b.stats(); st.Pending != n || st.Processing != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func testReaperDeadLettersExhausted(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 1})[0]
	b.claimFor(1, time.Second)
	b.clk.Advance(2 * time.Second)
	rs := b.reap()
	if len(rs) != 1 || !rs[0].Dead || rs[0].StuckFor != time.Second {
		t.Fatalf("reap = %+v", rs)
	}
	in := b.wantState(id, store.Dead)
	if in.DeadReason != store.ReasonLeaseExpired || in.LastError != "lease expired" {
		t.Fatalf("reason %q, last error %q; want lease_expired, lease expired", in.DeadReason, in.LastError)
	}
	// A reaped message is visible from the reap, as one given back is.
	if !in.VisibleAt.Equal(in.FinishedAt) || !in.FinishedAt.Equal(b.clk.Now()) {
		t.Fatalf("visible at %s, finished at %s; want both the reap's time %s", in.VisibleAt, in.FinishedAt, b.clk.Now())
	}
}
