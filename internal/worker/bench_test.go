package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// countingStore closes done when n completions have gone through.
type countingStore struct {
	store.Store
	n    int64
	seen atomic.Int64
	done chan struct{}
}

func (c *countingStore) Complete(ctx context.Context, cs []store.Completion) ([]error, error) {
	errs, err := c.Store.Complete(ctx, cs)
	if err == nil && c.seen.Add(int64(len(cs))) == c.n {
		close(c.done)
	}
	return errs, err
}

// BenchmarkWorkerOverhead measures the runtime's cost per message on the
// memory store: claim, handler call, completion and lease bookkeeping, with
// a handler that does nothing. Messages are enqueued before the timer
// starts.
func BenchmarkWorkerOverhead(b *testing.B) {
	for _, conc := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			mem, err := memory.New(memory.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer mem.Close()
			ctx := context.Background()
			batch := make([]store.NewMessage, 0, 1000)
			for i := 0; i < b.N; i += len(batch) {
				batch = batch[:min(cap(batch), b.N-i)]
				for j := range batch {
					batch[j] = store.NewMessage{Queue: queue, Payload: []byte("payload")}
				}
				if _, err := mem.Enqueue(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			st := &countingStore{Store: mem, n: int64(b.N), done: make(chan struct{})}
			w, err := worker.New(valid(b, worker.Config{Deps: with(st), Queues: queues(conc),
				Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })}))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			<-st.done
			b.StopTimer()
			if err := w.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			if err := <-ran; err != nil {
				b.Fatal(err)
			}
		})
	}
}
