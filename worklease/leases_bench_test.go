package worklease_test

import (
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/worklease"
)

// BenchmarkAcquireSucceed measures one acquire and one succeed on one domain,
// with the default random tokens.
func BenchmarkAcquireSucceed(b *testing.B) {
	l, err := worklease.New(worklease.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var offset int64
	for b.Loop() {
		offset++
		r, err := l.TryAcquire("bench", offset)
		if err != nil || r.Code != worklease.Acquired {
			b.Fatalf("TryAcquire(%d) = %v, %v", offset, r, err)
		}
		if s, err := l.Succeed("bench", r.Token); err != nil || s.Code != worklease.NoBacklog {
			b.Fatalf("Succeed = %v, %v", s, err)
		}
	}
}

// fixedClock is a clock whose Now is free, for measuring the package's own
// cost. Only Now is implemented.
type fixedClock struct {
	clock.Clock
	now time.Time
}

func (c fixedClock) Now() time.Time { return c.now }

// BenchmarkAcquireSucceedCheapDeps is BenchmarkAcquireSucceed with a clock
// that costs nothing and counter tokens: what is left is the package's own
// cost (map lookups, locks, the terminal set) plus one token allocation.
func BenchmarkAcquireSucceedCheapDeps(b *testing.B) {
	var n int64
	l, err := worklease.New(worklease.Config{
		Clock:    fixedClock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)},
		NewToken: func() string { n++; return strconv.FormatInt(n, 10) },
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var offset int64
	for b.Loop() {
		offset++
		r, err := l.TryAcquire("bench", offset)
		if err != nil || r.Code != worklease.Acquired {
			b.Fatalf("TryAcquire(%d) = %v, %v", offset, r, err)
		}
		if _, err := l.Succeed("bench", r.Token); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSystemClockNow measures the system clock's Now, which every
// acquisition calls, for reading BenchmarkAcquireSucceed: it is a floor the
// package cannot go below.
func BenchmarkSystemClockNow(b *testing.B) {
	clk := clock.System()
	for b.Loop() {
		_ = clk.Now()
	}
}

// submit hands offset to domain as a producer that also helps: whoever
// acquires an offset processes it and then follows the hints until the
// backlog is empty or another caller holds the next offset. It reports how
// many offsets this call processed.
func submit(tb testing.TB, l *worklease.Leases, domain string, offset int64) int {
	done := 0
	for {
		r, err := l.TryAcquire(domain, offset)
		if err != nil {
			// Declared here, not above: errors.As makes it escape, and the
			// common path should not pay for that allocation.
			var order *worklease.BacklogOrderingError
			if !errors.As(err, &order) {
				tb.Fatalf("TryAcquire(%q, %d): %v", domain, offset, err)
			}
			// The domain is idle with a backlog: whoever finished last is
			// about to acquire the head. Help by acquiring it, then retry.
			if h, err := l.TryAcquire(domain, order.Expected); err == nil && h.Code == worklease.Acquired {
				done += drain(tb, l, domain, h.Token)
			}
			continue
		}
		if r.Code == worklease.Acquired {
			done += drain(tb, l, domain, r.Token)
		}
		// Enqueued, AlreadyAcquired, AlreadyProcessed: the offset is in the
		// hands of whoever holds the lease.
		return done
	}
}

// drain succeeds the lease token fences and follows the hints.
func drain(tb testing.TB, l *worklease.Leases, domain, token string) int {
	for done := 1; ; done++ {
		s, err := l.Succeed(domain, token)
		if err != nil {
			tb.Fatalf("Succeed(%q): %v", domain, err)
		}
		if s.Code == worklease.NoBacklog {
			return done
		}
		r, err := l.TryAcquire(domain, s.Next)
		if err != nil {
			tb.Fatalf("TryAcquire(%q, %d) after hint: %v", domain, s.Next, err)
		}
		if r.Code != worklease.Acquired {
			return done // another caller acquired the head and drains on
		}
		token = r.Token
	}
}

// BenchmarkAcquireSucceedParallel submits increasing offsets to many domains
// from every goroutine. Each goroutine walks its own stride of the domains,
// so with at least as many domains as goroutines they rarely collide; with
// one domain they always do, and the helping protocol of submit keeps it
// correct.
func BenchmarkAcquireSucceedParallel(b *testing.B) {
	for _, domains := range []int{1, 16, 1024} {
		b.Run("domains="+strconv.Itoa(domains), func(b *testing.B) {
			l, err := worklease.New(worklease.Config{})
			if err != nil {
				b.Fatal(err)
			}
			names := make([]string, domains)
			next := make([]paddedCounter, domains)
			for i := range names {
				names[i] = "domain-" + strconv.Itoa(i)
			}
			var goroutines, processed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := int(goroutines.Add(1) - 1)
				stride := max(1, int(runtime.GOMAXPROCS(0)))
				i := g % domains
				local := 0
				for pb.Next() {
					offset := next[i].n.Add(1)
					local += submit(b, l, names[i], offset)
					i = (i + stride) % domains
				}
				processed.Add(int64(local))
			})
			b.StopTimer()
			var want int64
			for i, name := range names {
				want += next[i].n.Load()
				if lease, ok := l.Lease(name); ok || len(l.Backlog(name)) != 0 {
					b.Fatalf("domain %s not drained: lease %v, backlog %v", name, lease, l.Backlog(name))
				}
			}
			if processed.Load() != want {
				b.Fatalf("processed %d offsets, submitted %d", processed.Load(), want)
			}
		})
	}
}

// paddedCounter keeps each domain's offset counter on its own cache line.
type paddedCounter struct {
	n atomic.Int64
	_ [56]byte
}

// BenchmarkMemoryMillionOffsets processes 1,000,000 consecutive offsets in
// one domain and reports the heap the Leases holds afterwards (after a GC,
// so the garbage of the run is not counted), and the bytes of its terminal
// sets.
func BenchmarkMemoryMillionOffsets(b *testing.B) {
	const n = 1_000_000
	var token atomic.Int64
	newToken := func() string { return strconv.FormatInt(token.Add(1), 36) }
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l, err := worklease.New(worklease.Config{NewToken: newToken})
		if err != nil {
			b.Fatal(err)
		}
		for offset := int64(1); offset <= n; offset++ {
			r, err := l.TryAcquire("d", offset)
			if err != nil || r.Code != worklease.Acquired {
				b.Fatalf("TryAcquire(%d) = %v, %v", offset, r, err)
			}
			if _, err := l.Succeed("d", r.Token); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "heap-bytes")
		_, _, terminal := worklease.TerminalRanges(l, "d")
		b.ReportMetric(float64(terminal), "terminal-bytes")
		runtime.KeepAlive(l)
	}
}
