package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold/internal/metrictest"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

func TestOneWorkerManyQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 30 * time.Second
		release := make(chan struct{})
		var mu sync.Mutex
		running, most := map[string]int{}, map[string]int{}
		b := start(t, worker.Config{LeaseDuration: lease,
			Queues: []worker.QueueConfig{{Name: "a", Concurrency: 2}, {Name: "b", Concurrency: 3}},
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				mu.Lock()
				running[m.Queue]++
				most[m.Queue] = max(most[m.Queue], running[m.Queue])
				mu.Unlock()
				defer func() {
					mu.Lock()
					running[m.Queue]--
					mu.Unlock()
				}()
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})})
		st := b.store
		for range 10 {
			b.enqueue(store.NewMessage{Queue: "a", Payload: []byte("x")}, store.NewMessage{Queue: "b", Payload: []byte("x")})
		}
		synctest.Wait()
		before := st.extendCalls.Load()
		time.Sleep(lease / 3) // one tick
		synctest.Wait()
		if got := st.extendCalls.Load() - before; got != 1 {
			t.Fatalf("extend calls in one tick = %d, want 1 for both queues", got)
		}
		st.mu.Lock()
		size := st.extendSizes[len(st.extendSizes)-1]
		st.mu.Unlock()
		if size != 5 {
			t.Fatalf("the tick's extend call carried %d leases, want 5 (2 of a, 3 of b)", size)
		}
		close(release)
		b.wait(time.Minute, "every message completed", func() bool {
			return len(b.list("a", store.Completed)) == 10 && len(b.list("b", store.Completed)) == 10
		})
		mu.Lock()
		defer mu.Unlock()
		if most["a"] != 2 || most["b"] != 3 {
			t.Fatalf("most handlers at once: %v, want a:2 b:3", most)
		}
	})
}

func TestKindsHaveTheirOwnLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		type run struct {
			kind  string
			cause error
			at    time.Time
		}
		runs := make(chan run, 10)
		b := start(t, worker.Config{LeaseDuration: lease, MaxProcessingTime: time.Hour,
			Kinds: map[string]worker.KindConfig{
				"quick": {MaxProcessingTime: 5 * time.Second},
				"later": {RetryDelay: func(int) time.Duration { return 42 * time.Second }},
			},
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				if m.Kind == "later" {
					runs <- run{m.Kind, nil, time.Now()}
					return errors.New("again")
				}
				err := sleepCtx(ctx, 10*time.Second)
				runs <- run{m.Kind, err, time.Now()}
				return err
			})})
		b.enqueue(store.NewMessage{Kind: "quick", Payload: []byte("x"), MaxDeliveries: 1},
			store.NewMessage{Kind: "slow", Payload: []byte("x"), MaxDeliveries: 1},
			store.NewMessage{Kind: "later", Payload: []byte("x"), MaxDeliveries: 2})
		got := map[string][]run{}
		for range 4 {
			r := recv(t, runs, time.Minute)
			got[r.kind] = append(got[r.kind], r)
		}
		if c := got["quick"][0].cause; !errors.Is(c, worker.ErrMaxProcessingTime) {
			t.Errorf("quick: cause %v, want its own 5 s limit", c)
		}
		if c := got["slow"][0].cause; c != nil {
			t.Errorf("slow: cause %v, want none under the worker's hour", c)
		}
		if l := got["later"]; len(l) != 2 || l[1].at.Sub(l[0].at) != 42*time.Second {
			t.Errorf("later: runs %v, want two 42 s apart", l)
		}
	})
}

func TestMetricsCarryTheKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		b := start(t, worker.Config{Deps: metered(reader),
			Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })})
		b.enqueue(store.NewMessage{Kind: "email", Payload: []byte("x")}, store.NewMessage{Kind: "email", Payload: []byte("x")},
			store.NewMessage{Payload: []byte("x")})
		b.wait(time.Minute, "completions", b.completed(3))
		synctest.Wait()
		data := metrictest.Collect(t, reader)
		byKind := map[string]int64{}
		for _, dp := range data["leasehold.messages.completed"].(metricdata.Sum[int64]).DataPoints {
			k, _ := dp.Attributes.Value("kind")
			if q, _ := dp.Attributes.Value("queue"); q.AsString() != queue {
				t.Errorf("a series without the queue: %v", dp.Attributes.ToSlice())
			}
			byKind[k.AsString()] += dp.Value
		}
		if byKind["email"] != 2 || byKind[""] != 1 || len(byKind) != 2 {
			t.Fatalf("completed by kind %v, want email:2 and 1 without a kind", byKind)
		}
	})
}
