package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/metrictest"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

func TestWatchdogCatchesStalledLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var reports [][]worker.Stall
		reader := sdkmetric.NewManualReader()
		wd, err := worker.NewWatchdog(worker.WatchdogConfig{Interval: time.Second, Threshold: 5 * time.Second, Logger: quietLogger(),
			MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			OnStall: func(s []worker.Stall) {
				mu.Lock()
				defer mu.Unlock()
				reports = append(reports, s)
			}})
		if err != nil {
			t.Fatal(err)
		}
		// A worker whose downstream check hangs stops beating; an idle one
		// keeps beating.
		hang := make(chan struct{})
		stuck := start(t, worker.Config{PollInterval: time.Second, LongPoll: time.Second, Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil }),
			Saturated: func(context.Context) bool { <-hang; return false }})
		idle := start(t, worker.Config{PollInterval: time.Second, LongPoll: time.Second, Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })})
		defer close(hang) // before the workers' cleanup, which waits for them
		wd.Watch("stuck", stuck.w.Heartbeat())
		wd.Watch("idle", idle.w.Heartbeat())
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

func TestConfigErrors(t *testing.T) {
	h := worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		name string
		cfg  worker.Config
		want string
	}{
		{"no store", worker.Config{Queue: queue, Handler: h}, "Store is nil"},
		{"no handler", worker.Config{Store: st, Queue: queue}, "Handler is nil"},
		{"bad queue", worker.Config{Store: st, Handler: h}, "Queue"},
		{"interval over a third of the extension", worker.Config{Store: st, Queue: queue, Handler: h,
			LeaseExtender: &worker.LeaseExtenderConfig{Enabled: true, Interval: 11 * time.Second, Extension: 30 * time.Second}},
			"Interval 11s exceeds a third of Extension 30s"},
		{"interval over a third of the lease", worker.Config{Store: st, Queue: queue, Handler: h, LeaseDuration: 30 * time.Second,
			LeaseExtender: &worker.LeaseExtenderConfig{Enabled: true, Interval: 60 * time.Second, Extension: 300 * time.Second}},
			"Interval 1m0s exceeds a third of the lease duration 30s"},
		{"disabled with settings", worker.Config{Store: st, Queue: queue, Handler: h,
			LeaseExtender: &worker.LeaseExtenderConfig{Interval: time.Second}}, "Enabled is false"},
		{"shutdown longer than the lease without a keeper", worker.Config{Store: st, Queue: queue, Handler: h,
			LeaseDuration: 10 * time.Second, ShutdownTimeout: 20 * time.Second, LeaseExtender: &worker.LeaseExtenderConfig{}},
			"ShutdownTimeout 20s exceeds LeaseDuration 10s"},
		{"reap interval not below the lease", worker.Config{Store: st, Queue: queue, Handler: h,
			LeaseDuration: 10 * time.Second, ReapInterval: 10 * time.Second}, "Interval 10s must be below the lease duration 10s"},
		{"concurrency", worker.Config{Store: st, Queue: queue, Handler: h, Concurrency: -1}, "Concurrency is -1"},
		{"lease", worker.Config{Store: st, Queue: queue, Handler: h, LeaseDuration: -time.Second}, "LeaseDuration"},
		{"lease too short to keep", worker.Config{Store: st, Queue: queue, Handler: h, LeaseDuration: 999 * time.Millisecond},
			"LeaseDuration is 999ms, must be at least 1s"},
		{"worker id", worker.Config{Store: st, Queue: queue, Handler: h, WorkerID: strings.Repeat("w", 300)}, "WorkerID: invalid argument: worker id is 300 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := worker.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := worker.New(worker.Config{Store: st, Queue: queue, Handler: h,
		LeaseExtender: &worker.LeaseExtenderConfig{Enabled: true, Interval: 10 * time.Second, Extension: 30 * time.Second}}); err != nil {
		t.Fatalf("interval of exactly a third: %v", err)
	}
}

func TestKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newStore(t)
		mb, err := mailbox.New(mailbox.Config{Store: st, Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mb.SendBatch(ctx, [][]byte{[]byte("a"), []byte("b")}, mailbox.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		receive := func() *mailbox.Message {
			msgs, err := mb.Receive(ctx, mailbox.ReceiveOptions{Visibility: 3 * time.Second})
			if err != nil || len(msgs) != 1 {
				t.Fatalf("receive: %d, %v", len(msgs), err)
			}
			return msgs[0]
		}
		msgs := []*mailbox.Message{receive()}
		cfg := worker.KeepAliveConfig{LeaseExtenderConfig: worker.LeaseExtenderConfig{Enabled: true, Interval: time.Second, Extension: 3 * time.Second}, Logger: quietLogger()}

		// Kept alive through 10 s of work on a 3 s lease.
		if err := worker.KeepAlive(ctx, msgs[0], cfg, func(ctx context.Context) error { return sleepCtx(ctx, 10*time.Second) }); err != nil {
			t.Fatal(err)
		}
		if err := msgs[0].Ack(ctx); err != nil {
			t.Fatalf("ack after KeepAlive: %v", err)
		}

		// The store refuses: the message was acked behind our back.
		msgs = append(msgs, receive())
		if err := msgs[1].Ack(ctx); err != nil {
			t.Fatal(err)
		}
		var cause error
		err = worker.KeepAlive(ctx, msgs[1], cfg, func(ctx context.Context) error {
			cause = sleepCtx(ctx, 10*time.Second)
			return cause
		})
		if !errors.Is(err, store.ErrLeaseLost) || !errors.Is(cause, store.ErrLeaseLost) {
			t.Fatalf("KeepAlive = %v, fn's cause %v; want ErrLeaseLost for both", err, cause)
		}
		noop := func(context.Context) error { return nil }
		if err := worker.KeepAlive(ctx, msgs[1], worker.KeepAliveConfig{LeaseExtenderConfig: worker.LeaseExtenderConfig{Enabled: true}}, noop); err == nil {
			t.Fatal("KeepAlive without an extension: no error")
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
			MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
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
		b := start(t, worker.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				switch string(m.Payload) {
				case "bad":
					return worker.Permanent(errors.New("bad"))
				case "flaky":
					if m.Attempt == 1 {
						return errors.New("flaky")
					}
				}
				return nil
			})})
		b.enqueue(store.NewMessage{Payload: []byte("ok")}, store.NewMessage{Payload: []byte("ok")},
			store.NewMessage{Payload: []byte("bad")}, store.NewMessage{Payload: []byte("flaky")})
		b.wait(time.Minute, "three completions", b.completed(3))
		synctest.Wait()
		data := metrictest.Collect(t, reader)
		for name, want := range map[string]int64{"leasehold.messages.claimed": 5, "leasehold.messages.completed": 3,
			"leasehold.messages.failed": 1, "leasehold.messages.dead_lettered": 1, "leasehold.messages.in_flight": 0} {
			if got := metrictest.Sum(t, data, name); got != want {
				t.Errorf("%s = %d, want %d", name, got, want)
			}
		}
		h := data["leasehold.handler.duration"].(metricdata.Histogram[float64])
		if len(h.DataPoints) != 1 || h.DataPoints[0].Count != 5 {
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
