package worker_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

// A settled message is the worker's no more: nothing of it, its payload
// least of all, stays reachable through another message of its claim
// whose handler runs on.
func TestSettledMessageIsNotKeptByItsClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		var mu sync.Mutex
		payloads := map[string]weak.Pointer[byte]{}
		// The worker's payloads are its own, as a database's are: the
		// memory store keeps those it hands out.
		st.claimed = func(ds []store.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			for i := range ds {
				p := bytes.Clone(ds[i].Payload)
				ds[i].Payload = p
				payloads[string(p[:4])] = weak.Make(&p[0])
			}
		}
		body := func(name string) []byte { return append([]byte(name), make([]byte, 64<<10)...) }
		if _, err := st.Enqueue(context.Background(), []store.NewMessage{{Queue: queue, Payload: body("fast")},
			{Queue: queue, Payload: body("slow")}}); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		b := start(t, worker.Config{Deps: with(st), Queues: queues(2),
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				if bytes.HasPrefix(m.Payload, []byte("slow")) {
					select {
					case <-release:
					case <-ctx.Done():
					}
					return nil
				}
				return worker.Permanent(errors.New("fast fails"))
			})})
		defer close(release)
		b.wait(time.Minute, "fast's failure", func() bool { return len(b.list(queue, store.Dead)) == 1 })
		synctest.Wait()
		st.mu.Lock()
		sizes := st.claimSizes
		st.mu.Unlock()
		if len(sizes) != 1 || sizes[0] != 2 {
			t.Fatalf("claims of %v messages, want one of both", sizes)
		}
		runtime.GC()
		runtime.GC()
		mu.Lock()
		defer mu.Unlock()
		if payloads["slow"].Value() == nil {
			t.Fatal("the running handler's payload was collected")
		}
		if payloads["fast"].Value() != nil {
			t.Fatal("the dead message's payload is still reachable while the other message of its claim runs")
		}
	})
}
