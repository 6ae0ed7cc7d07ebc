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

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/metrictest"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

func TestWatchdogCatchesStalledLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var reports [][]worker.Stall
		reader := sdkmetric.NewManualReader()
		d := metered(reader)
		d.Clock, d.Logger = clock.System(), quietLogger()
		wd, err := worker.NewWatchdog(worker.WatchdogConfig{Deps: d, Interval: time.Second, Threshold: 5 * time.Second,
			OnStall: func(s []worker.Stall) {
				mu.Lock()
				defer mu.Unlock()
				reports = append(reports, s)
			}})
		if err != nil {
			t.Fatal(err)
		}
		// A worker whose claim hangs stops beating; an idle one keeps
		// beating.
		hang := &gatedStore{spyStore: newStore(t), gate: make(chan struct{})}
		nothing := worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })
		stuck, stuckRan := runWorker(t, hang, worker.Config{PollInterval: time.Second, LongPoll: time.Second, Handler: nothing})
		idle := start(t, worker.Config{PollInterval: time.Second, LongPoll: time.Second, Handler: nothing})
		defer func() {
			close(hang.gate)
			if err := stuck.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			<-stuckRan
		}()
		wd.Watch("stuck", stuck.Heartbeats()[queue])
		wd.Watch("idle", idle.w.Heartbeats()[queue])
		go func() { _ = wd.Run(context.Background()) }()
		defer func() { _ = wd.Shutdown(context.Background()) }()

		time.Sleep(7500 * time.Millisecond)
		mu.Lock()
		got := reports
		mu.Unlock()
		// Checks at 6 s and 7 s see "stuck" silent for 6 s and 7 s.
		if len(got) != 2 || len(got[0]) != 1 || got[0][0].Name != "stuck" || got[1][0].Silent != 7*time.Second {
			t.Fatalf("stall reports %+v", got)
		}
		if s := wd.Stalled(); len(s) != 1 || s[0].Name != "stuck" {
			t.Fatalf("Stalled() = %+v", s)
		}
		if n := metrictest.Sum(t, metrictest.Collect(t, reader), "leasehold.watchdog.stalls"); n != 2 {
			t.Fatalf("leasehold.watchdog.stalls = %d, want 2", n)
		}
	})
}

func TestStoreRefusedExtensionCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		reader := sdkmetric.NewManualReader()
		leases := make(chan store.Lease, 1)
		causes := make(chan time.Duration, 1)
		b := start(t, worker.Config{LeaseDuration: lease, MaxProcessingTime: time.Hour,
			Deps: metered(reader),
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				t0 := time.Now()
				leases <- m.Lease
				err := sleepCtx(ctx, time.Hour)
				if errors.Is(err, store.ErrLeaseLost) {
					causes <- time.Since(t0)
				}
				return err
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x")})
		l := recv(t, leases, time.Second)
		// Someone else finishes the message: the next extension is refused.
		if errs, err := b.store.Store.Complete(context.Background(), []store.Completion{{Lease: l}}); err != nil || errs[0] != nil {
			t.Fatalf("complete behind the worker's back: %v %v", errs, err)
		}
		if got := recv(t, causes, time.Minute); got != time.Second {
			t.Fatalf("cancelled after %s, want at the first extension round (1 s), before the lease's end", got)
		}
		synctest.Wait()
		if n := b.store.completes.Load(); n != 0 {
			t.Fatalf("the worker attempted %d completions of a lost lease", n)
		}
		data := metrictest.Collect(t, reader)
		ext := data["leasehold.lease.extensions"].(metricdata.Sum[int64])
		var lostCount int64 = -1
		for _, dp := range ext.DataPoints {
			if r, _ := dp.Attributes.Value("result"); r.AsString() == "lost" {
				lostCount = dp.Value
			}
		}
		if lostCount != 1 {
			t.Fatalf("lost leases counted %d (-1: none), want 1", lostCount)
		}
	})
}

func TestWorkerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		snoozed := false
		running := make(chan struct{})
		b := start(t, worker.Config{Deps: metered(reader),
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				switch string(m.Payload) {
				case "bad":
					return worker.Permanent(errors.New("bad"))
				case "flaky":
					if m.Attempt == 1 {
						return errors.New("flaky")
					}
				case "sleepy":
					if !snoozed {
						snoozed = true
						return worker.Snooze(time.Second)
					}
				case "doomed":
					close(running)
					<-ctx.Done()
					return context.Cause(ctx)
				}
				return nil
			})})
		ids := b.enqueue(store.NewMessage{Payload: []byte("ok")}, store.NewMessage{Payload: []byte("ok")},
			store.NewMessage{Payload: []byte("bad")}, store.NewMessage{Payload: []byte("flaky")},
			store.NewMessage{Payload: []byte("sleepy")}, store.NewMessage{Payload: []byte("doomed")})
		<-running
		if _, err := b.store.Store.Cancel(context.Background(), queue, ids[5:]); err != nil {
			t.Fatal(err)
		}
		b.wait(time.Minute, "four completions", b.completed(4))
		synctest.Wait()
		data := metrictest.Collect(t, reader)
		for name, want := range map[string]int64{"leasehold.messages.claimed": 8, "leasehold.messages.completed": 4,
			"leasehold.messages.failed": 1, "leasehold.messages.dead_lettered": 1, "leasehold.messages.snoozed": 1,
			"leasehold.messages.cancelled": 1, "leasehold.messages.in_flight": 0} {
			if got := metrictest.Sum(t, data, name); got != want {
				t.Errorf("%s = %d, want %d", name, got, want)
			}
		}
		h := data["leasehold.handler.duration"].(metricdata.Histogram[float64])
		if len(h.DataPoints) != 1 || h.DataPoints[0].Count != 8 {
			t.Fatalf("handler.duration: %+v", h.DataPoints)
		}
		// Series are by queue; the worker id, new at every restart, is not
		// an attribute.
		attrs := h.DataPoints[0].Attributes
		if q, _ := attrs.Value("queue"); q.AsString() != queue || attrs.HasValue("worker.id") || attrs.Len() != 1 {
			t.Fatalf("handler.duration attributes %v, want the queue only", attrs.ToSlice())
		}
	})
}
