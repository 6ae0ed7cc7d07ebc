package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// BenchBatch is the batch size of the end-to-end benchmarks: enqueue,
// claim and complete each move this many messages per call.
const BenchBatch = 100

// BenchmarkEndToEnd measures the full life of b.N messages on s: enqueued in
// batches of BenchBatch, claimed in batches of up to BenchBatch under a
// lease, and completed in batches. It reports msgs/s.
func BenchmarkEndToEnd(b *testing.B, s store.Store, queue string) {
	ctx := context.Background()
	payload := make([]byte, 100)
	batch := make([]store.NewMessage, BenchBatch)
	for i := range batch {
		batch[i] = store.NewMessage{Queue: queue, Payload: payload}
	}
	cs := make([]store.Completion, 0, BenchBatch)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(BenchBatch, b.N-done)
		if _, err := s.Enqueue(ctx, batch[:n]); err != nil {
			b.Fatal(err)
		}
		got := 0
		for got < n {
			ds, err := s.Claim(ctx, store.Claim{Queue: queue, WorkerID: "bench", Max: BenchBatch, LeaseDuration: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if len(ds) == 0 {
				b.Fatalf("claimed nothing with %d messages outstanding", n-got)
			}
			cs = cs[:0]
			for _, d := range ds {
				cs = append(cs, store.Completion{Lease: d.Lease})
			}
			res, err := s.Complete(ctx, cs)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range res {
				if e != nil {
					b.Fatal(e)
				}
			}
			got += len(ds)
		}
		done += n
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkClaim measures claiming and completing batches of BenchBatch
// messages from a queue kept topped up; compare it on an empty table and on
// one full of finished rows to see that claims do not pay for history. It
// reports ns per claimed message.
func BenchmarkClaim(b *testing.B, s store.Store, queue string) {
	ctx := context.Background()
	batch := make([]store.NewMessage, BenchBatch)
	for i := range batch {
		batch[i] = store.NewMessage{Queue: queue, Payload: make([]byte, 100)}
	}
	var claimTime time.Duration
	var claimed int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := s.Enqueue(ctx, batch); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := b.Elapsed()
		ds, err := s.Claim(ctx, store.Claim{Queue: queue, WorkerID: "bench", Max: BenchBatch, LeaseDuration: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		claimTime += b.Elapsed() - start
		claimed += len(ds)
		b.StopTimer()
		cs := make([]store.Completion, len(ds))
		for j, d := range ds {
			cs[j] = store.Completion{Lease: d.Lease}
		}
		if _, err := s.Complete(ctx, cs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if claimed > 0 {
		b.ReportMetric(float64(claimTime.Nanoseconds())/float64(claimed), "ns/claimed-msg")
	}
}

// BenchmarkEndToEndParallel is BenchmarkEndToEnd with workers goroutines
// sharing one queue, each running its own cycles of enqueue, claim, one
// batched lease extension (the heartbeat a worker sends per tick) and
// complete. It reports msgs/s.
func BenchmarkEndToEndParallel(b *testing.B, s store.Store, queue string, workers int) {
	ctx := context.Background()
	payload := make([]byte, 100)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		share := b.N / workers
		if w < b.N%workers {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cycles(ctx, s, queue, share, payload); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func cycles(ctx context.Context, s store.Store, queue string, n int, payload []byte) error {
	batch := make([]store.NewMessage, BenchBatch)
	for i := range batch {
		batch[i] = store.NewMessage{Queue: queue, Payload: payload}
	}
	leases := make([]store.Lease, 0, BenchBatch)
	cs := make([]store.Completion, 0, BenchBatch)
	for done := 0; done < n; {
		k := min(BenchBatch, n-done)
		if _, err := s.Enqueue(ctx, batch[:k]); err != nil {
			return err
		}
		// Other workers may take these messages and this one theirs; each
		// claims until it has handled as many as it enqueued.
		for got := 0; got < k; {
			ds, err := s.Claim(ctx, store.Claim{Queue: queue, WorkerID: "bench", Max: k - got, LeaseDuration: time.Minute})
			if err != nil {
				return err
			}
			if len(ds) == 0 {
				continue
			}
			leases, cs = leases[:0], cs[:0]
			for _, d := range ds {
				leases = append(leases, d.Lease)
				cs = append(cs, store.Completion{Lease: d.Lease})
			}
			if ext, err := s.Extend(ctx, leases, time.Minute); err != nil {
				return err
			} else if len(ext.Lost) > 0 {
				return fmt.Errorf("%d leases lost", len(ext.Lost))
			}
			res, err := s.Complete(ctx, cs)
			if err != nil {
				return err
			}
			for _, e := range res {
				if e != nil {
					return e
				}
			}
			got += len(ds)
		}
		done += k
	}
	return nil
}
