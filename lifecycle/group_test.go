package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/lifecycle"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// testLoop runs until stopped, or fails when told to. Its graceful stop
// takes stopTakes.
type testLoop struct {
	state     runstate.State
	fail      chan error
	stopTakes time.Duration
	hard      atomic.Bool
}

func newTestLoop() *testLoop { return &testLoop{fail: make(chan error, 1)} }

func (l *testLoop) Run(ctx context.Context) error {
	ok, err := l.state.Begin()
	if !ok {
		return err
	}
	defer l.state.End()
	select {
	case err := <-l.fail:
		return err
	case <-l.state.Stopping():
		select {
		case <-time.After(l.stopTakes):
		case <-ctx.Done():
		}
		return nil
	case <-ctx.Done():
		l.hard.Store(true)
		return ctx.Err()
	}
}

func (l *testLoop) Shutdown(ctx context.Context) error { return l.state.Shutdown(ctx) }
func (l *testLoop) Running() bool                      { return l.state.Running() }

var _ lifecycle.Runnable = (*testLoop)(nil)
var _ lifecycle.Runnable = (*worker.Worker)(nil)
var _ lifecycle.Runnable = (*maintenance.Reaper)(nil)
var _ lifecycle.Runnable = (*worker.Watchdog)(nil)
var _ lifecycle.Runnable = (*lifecycle.Group)(nil)

func TestGroupStopsOthersWhenOneFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newTestLoop(), newTestLoop(), newTestLoop()
		g, err := lifecycle.NewGroup(lifecycle.GroupConfig{}, a, b, c)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- g.Run(context.Background()) }()
		synctest.Wait()
		if !a.Running() || !b.Running() || !c.Running() || !g.Running() {
			t.Fatal("not every loop runs")
		}
		boom := errors.New("boom")
		b.fail <- boom
		err = <-done
		if !errors.Is(err, boom) {
			t.Fatalf("group Run = %v, want the failing loop's error", err)
		}
		if a.Running() || c.Running() || g.Running() {
			t.Fatal("loops still running after the group returned")
		}
	})
}

func TestGroupShutdownSharesOneTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast, slow := newTestLoop(), newTestLoop()
		fast.stopTakes, slow.stopTakes = time.Second, time.Minute
		g, err := lifecycle.NewGroup(lifecycle.GroupConfig{ShutdownTimeout: 10 * time.Second}, fast, slow)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- g.Run(context.Background()) }()
		synctest.Wait()
		t0 := time.Now()
		err = g.Shutdown(context.Background())
		if err == nil {
			t.Fatal("shutdown of a loop slower than the timeout reported a clean stop")
		}
		if took := time.Since(t0); took != 10*time.Second {
			t.Fatalf("shutdown took %s, want the shared 10 s timeout", took)
		}
		// The slow loop goes on stopping on its own; the group's Run waits
		// for it.
		if err := <-done; err != nil || time.Since(t0) != time.Minute {
			t.Fatalf("Run = %v", err)
		}
	})
}

func TestGroupShutdownBeforeRunTwiceConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newTestLoop()
		g, err := lifecycle.NewGroup(lifecycle.GroupConfig{}, a)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := g.Shutdown(context.Background()); err != nil {
					t.Errorf("Shutdown before Run: %v", err)
				}
			})
		}
		wg.Wait()
		if err := g.Run(context.Background()); err != nil {
			t.Fatalf("Run after Shutdown = %v, want nil at once", err)
		}
		if a.Running() {
			t.Fatal("a loop ran after the group was shut down")
		}
		if err := g.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGroupHardStopOnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newTestLoop()
		a.stopTakes = time.Hour
		g, err := lifecycle.NewGroup(lifecycle.GroupConfig{}, a)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || !a.hard.Load() {
			t.Fatalf("Run = %v, hard %v: want the loop stopped by the context", err, a.hard.Load())
		}
	})
}

func TestCoordinator(t *testing.T) {
	c := lifecycle.NewCoordinator()
	var calls []string
	c.Register(func() { calls = append(calls, "first") })
	gone := c.Register(func() { calls = append(calls, "unregistered") })
	c.Register(func() { calls = append(calls, "second") })
	c.OnEscalate(func() { calls = append(calls, "hard") })
	gone.Unregister()
	gone.Unregister()
	select {
	case <-c.Triggered():
		t.Fatal("triggered before Trigger")
	default:
	}
	c.Trigger()
	<-c.Triggered()
	if got := strings.Join(calls, ","); got != "first,second" {
		t.Fatalf("graceful callbacks ran as %q", got)
	}
	c.Register(func() { calls = append(calls, "late") })
	if calls[len(calls)-1] != "late" {
		t.Fatal("a callback registered after the trigger did not run at once")
	}
	select {
	case <-c.Escalated():
		t.Fatal("escalated after one trigger")
	default:
	}
	c.Trigger()
	<-c.Escalated()
	c.Trigger() // a third does nothing
	if got := strings.Join(calls, ","); got != "first,second,late,hard" {
		t.Fatalf("callbacks ran as %q", got)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// workerOn is the configuration of a worker of queue on st with a
// client's default settings, no upkeep and handler h, for the tests of
// loops and checks.
func workerOn(st store.Store, queue string, h worker.HandlerFunc) worker.Config {
	const lease = worker.DefaultLeaseDuration
	return worker.Config{Deps: maintenance.Deps{Store: st, Clock: clock.System(), Logger: quietLogger(), Meter: maintenance.Meter(nil)},
		Queues: []worker.QueueConfig{{Name: queue, Concurrency: 1}}, Handler: h, WorkerID: mailbox.NewWorkerID(),
		LeaseDuration: lease, HeartbeatInterval: lease / 3, MaxProcessingTime: 3 * lease, LongPoll: worker.DefaultLongPoll,
		PollInterval: mailbox.DefaultPollInterval, ShutdownTimeout: worker.DefaultShutdownTimeout, HardStopWait: worker.DefaultHardStopWait}
}

func TestHealthHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := memory.New(memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		cfg := workerOn(st, "q", func(context.Context, *worker.Message) error { <-release; return nil })
		cfg.PollInterval, cfg.LongPoll = time.Second, time.Second
		w, err := worker.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		wd, err := worker.NewWatchdog(worker.WatchdogConfig{Deps: cfg.Deps, Interval: time.Second, Threshold: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		silent := worker.NewHeartbeat(nil)
		wd.Watch("worker", w.Heartbeats()["q"])
		ready, live := lifecycle.HealthHandler(w.Ready), lifecycle.HealthHandler(wd.Live)
		get := func(h http.Handler) (int, string) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			return rec.Code, rec.Body.String()
		}
		ran := make(chan error, 1)
		go func() { ran <- w.Run(context.Background()) }()
		go func() { _ = wd.Run(context.Background()) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if code, body := get(ready); code != http.StatusOK {
			t.Fatalf("readiness of a running worker: %d %s", code, body)
		}
		if code, body := get(live); code != http.StatusOK {
			t.Fatalf("liveness of a beating worker: %d %s", code, body)
		}
		wd.Watch("silent", silent)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if code, body := get(live); code != http.StatusServiceUnavailable || !strings.Contains(body, "silent") {
			t.Fatalf("liveness with a stalled loop: %d %s", code, body)
		}
		// A draining worker fails readiness and claims nothing more while
		// its running handler finishes.
		if _, err := st.Enqueue(context.Background(), []store.NewMessage{{Queue: "q"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		shut := make(chan error, 1)
		go func() { shut <- w.Shutdown(context.Background()) }()
		synctest.Wait()
		if code, body := get(ready); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
			t.Fatalf("readiness while draining: %d %s", code, body)
		}
		if _, err := st.Enqueue(context.Background(), []store.NewMessage{{Queue: "q"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if s, _ := st.Stats(context.Background(), "q"); s.Pending != 1 || s.Processing != 1 || !w.Running() {
			t.Fatalf("draining worker: running %v, %+v", w.Running(), s)
		}
		close(release)
		if err := <-shut; err != nil {
			t.Fatal(err)
		}
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		_ = wd.Shutdown(context.Background())
		_ = st.Close()
		w2, err := worker.New(workerOn(st, "q", func(context.Context, *worker.Message) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		if code, body := get(lifecycle.HealthHandler(w2.Ready)); code != http.StatusServiceUnavailable || !strings.Contains(body, "store unreachable") {
			t.Fatalf("readiness with a closed store: %d %s", code, body)
		}
	})
}

// A repeat of a signal counts as a second request once the duplicate
// window has passed, and another signal counts at once.
func TestCoordinatorDuplicateWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second syscall.Signal
		after  time.Duration
	}{
		{"same signal after the window", syscall.SIGUSR1, lifecycle.DuplicateSignalWindow},
		{"another signal at once", syscall.SIGUSR2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New()
			c := lifecycle.NewCoordinator()
			c.Clock, c.RepeatWindow = clk, lifecycle.DuplicateSignalWindow
			stop := c.Listen(syscall.SIGUSR1, syscall.SIGUSR2)
			defer stop()
			_ = syscall.Kill(os.Getpid(), syscall.SIGUSR1)
			<-c.Triggered()
			clk.Advance(tc.after)
			_ = syscall.Kill(os.Getpid(), tc.second)
			select {
			case <-c.Escalated():
			case <-time.After(10 * time.Second): // real signal delivery
				t.Fatal("the second signal did not escalate")
			}
		})
	}
}
