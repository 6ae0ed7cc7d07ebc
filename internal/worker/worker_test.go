package worker_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// spyStore counts and can break the calls the worker makes.
type spyStore struct {
	store.Store
	extendCalls atomic.Int64
	completes   atomic.Int64
	releases    atomic.Int64

	mu          sync.Mutex
	extendSizes []int
	// claimSizes counts the messages of each claim that took any.
	claimSizes []int
	// extendErr, when set, is asked before each Extend; an error it returns
	// is the call's result.
	extendErr func() error
	// completeErr, when set, is asked before each Complete, likewise.
	completeErr func() error
	// claimErr, when set, is asked before each Claim, likewise.
	claimErr func() error
	// claimed, when set, sees each claim's deliveries before the worker
	// does, and may change them.
	claimed func(ds []store.Delivery)
}

// ask returns what the hook *f, if set, says about the call it precedes.
func (s *spyStore) ask(f *func() error) error {
	s.mu.Lock()
	hook := *f
	s.mu.Unlock()
	if hook == nil {
		return nil
	}
	return hook()
}

func (s *spyStore) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	if err := s.ask(&s.claimErr); err != nil {
		return nil, err
	}
	ds, err := s.Store.Claim(ctx, c)
	if len(ds) > 0 {
		s.mu.Lock()
		s.claimSizes = append(s.claimSizes, len(ds))
		claimed := s.claimed
		s.mu.Unlock()
		if claimed != nil {
			claimed(ds)
		}
	}
	return ds, err
}

func (s *spyStore) Extend(ctx context.Context, ls []store.Lease, d time.Duration) (store.Extended, error) {
	s.extendCalls.Add(1)
	s.mu.Lock()
	s.extendSizes = append(s.extendSizes, len(ls))
	s.mu.Unlock()
	if err := s.ask(&s.extendErr); err != nil {
		return store.Extended{}, err
	}
	return s.Store.Extend(ctx, ls, d)
}

func (s *spyStore) Complete(ctx context.Context, cs []store.Completion) ([]error, error) {
	s.completes.Add(int64(len(cs)))
	if err := s.ask(&s.completeErr); err != nil {
		return nil, err
	}
	return s.Store.Complete(ctx, cs)
}

func (s *spyStore) Release(ctx context.Context, r store.Release) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, r)
}

func (s *spyStore) setExtendErr(f func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extendErr = f
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// bundle is what a worker test needs.
type bundle struct {
	t     *testing.T
	store *spyStore
	w     *worker.Worker
	ran   chan error
}

const queue = "jobs"

// newStore returns a memory store on the bubble's clock.
func newStore(t testing.TB) *spyStore {
	t.Helper()
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &spyStore{Store: st}
}

// noReaper, as a test's ReapInterval, runs the worker without a reaper.
const noReaper = -1

// valid fills in what a test leaves out of cfg, as the client would, with
// quick exact retries, on a fresh spy store unless cfg has one.
func valid(t testing.TB, cfg worker.Config) worker.Config {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = newStore(t)
	}
	if cfg.Queues == nil {
		cfg.Queues = queues(worker.DefaultConcurrency)
	}
	cfg.Clock = clock.OrSystem(cfg.Clock)
	cfg.Logger = cmp.Or(cfg.Logger, quietLogger())
	if cfg.Meter == nil {
		cfg.Meter = maintenance.Meter(nil)
	}
	cfg.WorkerID = cmp.Or(cfg.WorkerID, "w")
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, worker.DefaultLeaseDuration)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, cfg.LeaseDuration/3)
	cfg.MaxProcessingTime = cmp.Or(cfg.MaxProcessingTime, 3*cfg.LeaseDuration)
	if cfg.Backoff.Initial == 0 && cfg.Backoff.Max == 0 && cfg.Backoff.Rand == nil {
		cfg.Backoff = backoff.Exponential{Initial: time.Second, Max: time.Second, Jitter: backoff.NoJitter}
	}
	cfg.LongPoll = cmp.Or(cfg.LongPoll, worker.DefaultLongPoll)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, mailbox.DefaultPollInterval)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, worker.DefaultShutdownTimeout)
	cfg.HardStopWait = cmp.Or(cfg.HardStopWait, worker.DefaultHardStopWait)
	switch cfg.ReapInterval {
	case 0:
		cfg.ReapInterval = min(maintenance.DefaultReapInterval, cfg.LeaseDuration/2)
	case noReaper:
		cfg.ReapInterval = 0
	}
	if cfg.Retention == nil {
		cfg.Retention = &maintenance.Retention{Completed: maintenance.DefaultCompletedRetention, Dead: maintenance.DefaultDeadRetention}
	}
	return cfg
}

// queues is the test queue alone, with n handlers.
func queues(n int) []worker.QueueConfig { return []worker.QueueConfig{{Name: queue, Concurrency: n}} }

// with are deps of st alone, for a test's Config; valid fills in the rest.
func with(st store.Store) maintenance.Deps { return maintenance.Deps{Store: st} }

// metered are deps whose meter reports to reader.
func metered(reader *sdkmetric.ManualReader) maintenance.Deps {
	return maintenance.Deps{Meter: maintenance.Meter(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))}
}

// newWorker returns a worker of cfg made valid.
func newWorker(t *testing.T, cfg worker.Config) *worker.Worker {
	t.Helper()
	w, err := worker.New(valid(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// start builds a worker from cfg on a fresh spy store (unless cfg has
// one) and runs it until the test ends. Call inside a synctest bubble.
func start(t *testing.T, cfg worker.Config) *bundle {
	t.Helper()
	cfg = valid(t, cfg)
	b := &bundle{t: t, store: cfg.Store.(*spyStore), ran: make(chan error, 1)}
	b.w = newWorker(t, cfg)
	go func() { b.ran <- b.w.Run(context.Background()) }()
	t.Cleanup(func() {
		if err := b.w.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-b.ran; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return b
}

func (b *bundle) enqueue(msgs ...store.NewMessage) []int64 {
	b.t.Helper()
	for i := range msgs {
		msgs[i].Queue = cmpString(msgs[i].Queue, queue)
	}
	res, err := b.store.Enqueue(context.Background(), msgs)
	if err != nil {
		b.t.Fatal(err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func cmpString(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

func (b *bundle) list(q string, s store.State) []store.Info {
	b.t.Helper()
	infos, err := b.store.List(context.Background(), store.ListFilter{Queue: q, State: s, Limit: store.MaxBatch})
	if err != nil {
		b.t.Fatal(err)
	}
	return infos
}

// wait blocks until cond holds, letting fake time run; it fails the test if
// that takes longer than limit of fake time.
func (b *bundle) wait(limit time.Duration, what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			b.t.Fatalf("after %s: %s did not happen", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
	}
}

func (b *bundle) completed(n int) func() bool {
	return func() bool { return len(b.list(queue, store.Completed)) == n }
}

// recv receives from ch, failing the test if nothing comes within limit of
// fake time.
func recv[T any](t *testing.T, ch <-chan T, limit time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(limit):
		t.Fatalf("nothing received within %s", limit)
		panic("unreachable")
	}
}

// sleepCtx waits d or until ctx ends, and returns the context's cause then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func TestKeeperKeepsLongHandlerAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		b := start(t, worker.Config{LeaseDuration: lease, MaxProcessingTime: time.Hour,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				return sleepCtx(ctx, 10*lease)
			})})
		b.enqueue(store.NewMessage{Payload: []byte("slow")})
		b.wait(11*lease, "completion", b.completed(1))
		if got := b.list(queue, store.Completed)[0].Deliveries; got != 1 {
			t.Fatalf("deliveries = %d, want 1", got)
		}
		// A tick every second while the 30 s handler runs; the one at 30 s
		// races with its end.
		if n := b.store.extendCalls.Load(); n != 29 && n != 30 {
			t.Fatalf("extend calls = %d over 30 s at one a second, want 29 or 30", n)
		}
	})
}

func TestTransientExtendErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		st := newStore(t)
		var calls atomic.Int64
		// The first extension (at 1 s) fails; the lease, valid until 3 s,
		// survives it.
		st.setExtendErr(func() error {
			if calls.Add(1) == 1 {
				return errors.New("connection reset")
			}
			return nil
		})
		b := start(t, worker.Config{Deps: with(st), LeaseDuration: lease, MaxProcessingTime: time.Hour,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				return sleepCtx(ctx, 4*lease)
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x")})
		b.wait(5*lease, "completion", b.completed(1))
		if got := b.list(queue, store.Completed)[0].Deliveries; got != 1 {
			t.Fatalf("deliveries = %d, want 1: the transient error must not cost the lease", got)
		}
	})
}

func TestExtendErrorsUntilExpiryCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		st := newStore(t)
		st.setExtendErr(func() error { return errors.New("database unreachable") })
		causes := make(chan error, 1)
		began := make(chan time.Time, 1)
		b := start(t, worker.Config{Deps: with(st), LeaseDuration: lease, MaxProcessingTime: time.Hour, ReapInterval: noReaper,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				began <- time.Now()
				err := sleepCtx(ctx, 10*lease)
				causes <- err
				return nil // even a handler that claims success is not completed
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x")})
		t0 := recv(t, began, time.Second)
		err := recv(t, causes, time.Minute)
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("cause = %v, want ErrLeaseLost", err)
		}
		if took := time.Since(t0); took != lease {
			t.Fatalf("cancelled after %s, want at the lease's end, %s", took, lease)
		}
		synctest.Wait()
		if n := b.store.completes.Load(); n != 0 {
			t.Fatalf("completions attempted = %d after a lost lease", n)
		}
		if got := b.list(queue, store.Processing); len(got) != 1 {
			t.Fatalf("processing = %d, want the message left for the reaper", len(got))
		}
	})
}

func TestMaxProcessingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		causes := make(chan error, 1)
		b := start(t, worker.Config{LeaseDuration: lease, MaxProcessingTime: 5 * time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				err := sleepCtx(ctx, time.Hour)
				causes <- err
				return err
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 1})
		if err := recv(t, causes, time.Minute); !errors.Is(err, worker.ErrMaxProcessingTime) {
			t.Fatalf("cause = %v, want ErrMaxProcessingTime", err)
		}
		b.wait(time.Second, "dead letter", func() bool { return len(b.list(queue, store.Dead)) == 1 })
		d := b.list(queue, store.Dead)[0]
		if d.DeadReason != store.ReasonMaxProcessingTime || !strings.Contains(d.LastError, "maximum processing time") {
			t.Fatalf("dead reason %q, error %q", d.DeadReason, d.LastError)
		}
	})
}

func TestPanicBecomesFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := start(t, worker.Config{LeaseDuration: 3 * time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				if m.Attempt == 1 {
					panic("boom")
				}
				return nil
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x")})
		b.wait(10*time.Second, "completion on the retry", b.completed(1))
		c := b.list(queue, store.Completed)[0]
		if c.Deliveries != 2 || !strings.Contains(c.LastError, "handler panicked: boom") {
			t.Fatalf("deliveries %d, last error %q", c.Deliveries, c.LastError)
		}
	})
}

func TestFailuresRetryThenDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts []time.Time
		var mu sync.Mutex
		b := start(t, worker.Config{LeaseDuration: 3 * time.Second,
			Backoff: backoff.Exponential{Initial: time.Second, Max: time.Minute, Jitter: backoff.NoJitter},
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				if m.Key == "permanent" {
					return worker.Permanent(errors.New("bad input"))
				}
				mu.Lock()
				attempts = append(attempts, time.Now())
				mu.Unlock()
				return fmt.Errorf("attempt %d failed", m.Attempt)
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 3}, store.NewMessage{Payload: []byte("y"), Key: "permanent"})
		b.wait(time.Minute, "two dead letters", func() bool { return len(b.list(queue, store.Dead)) == 2 })
		dead := b.list(queue, store.Dead)
		if dead[0].DeadReason != store.ReasonMaxDeliveries || dead[0].Deliveries != 3 || dead[0].LastError != "attempt 3 failed" {
			t.Fatalf("retried message: %+v", dead[0])
		}
		if dead[1].DeadReason != store.ReasonPermanent || dead[1].Deliveries != 1 {
			t.Fatalf("permanent failure: %+v", dead[1])
		}
		// Backoff: 1 s before the second attempt, 2 s before the third.
		if len(attempts) != 3 || attempts[1].Sub(attempts[0]) != time.Second || attempts[2].Sub(attempts[1]) != 2*time.Second {
			t.Fatalf("attempt times %v", attempts)
		}
	})
}

func TestConcurrencyBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, peak atomic.Int64
		b := start(t, worker.Config{Queues: queues(3),
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				n := running.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				defer running.Add(-1)
				return sleepCtx(ctx, time.Second)
			})})
		msgs := make([]store.NewMessage, 20)
		for i := range msgs {
			msgs[i].Payload = []byte("x")
		}
		b.enqueue(msgs...)
		synctest.Wait()
		if got := len(b.list(queue, store.Processing)); got != 3 {
			t.Fatalf("claimed %d messages with 3 slots", got)
		}
		b.wait(time.Minute, "all completions", b.completed(20))
		if p := peak.Load(); p != 3 {
			t.Fatalf("peak concurrency %d, want 3", p)
		}
	})
}

func TestRequestReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := start(t, worker.Config{LeaseDuration: 3 * time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				if string(m.Body()) == "bad" {
					return worker.Permanent(errors.New("cannot parse bad"))
				}
				m.SetReply(append([]byte("echo:"), m.Body()...))
				return nil
			})})
		ids := b.enqueue(store.NewMessage{Payload: []byte("hi"), ReplyTo: "replies"},
			store.NewMessage{Payload: []byte("bad"), ReplyTo: "replies"})
		b.wait(10*time.Second, "one request completed, one dead", func() bool {
			return b.completed(1)() && len(b.list(queue, store.Dead)) == 1
		})
		// The failed request is a dead letter with its error, and its
		// requester hears of it.
		if d := b.list(queue, store.Dead)[0]; d.ID != ids[1] || d.DeadReason != store.ReasonPermanent || !strings.Contains(d.LastError, "cannot parse bad") {
			t.Fatalf("the failed request: %+v", d)
		}
		replies := b.list("replies", store.Pending)
		if len(replies) != 2 {
			t.Fatalf("replies = %d, want 2", len(replies))
		}
		got := map[int64]worker.Reply{}
		for _, r := range replies {
			rep, err := worker.DecodeReply(r.Payload)
			if err != nil {
				t.Fatal(err)
			}
			got[rep.RequestID] = rep
		}
		if r := got[ids[0]]; string(r.Output) != "echo:hi" || r.Error != "" {
			t.Fatalf("reply to %d: %+v", ids[0], r)
		}
		if r := got[ids[1]]; r.Output != nil || !strings.Contains(r.Error, "cannot parse bad") {
			t.Fatalf("reply to %d: %+v", ids[1], r)
		}
	})
}

func TestKeeperOneCallPerTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		const lease = 30 * time.Second
		release := make(chan struct{})
		var started atomic.Int64
		b := start(t, worker.Config{Queues: queues(n), LeaseDuration: lease,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				started.Add(1)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})})
		msgs := make([]store.NewMessage, n)
		for i := range msgs {
			msgs[i].Payload = []byte("x")
		}
		b.enqueue(msgs...)
		b.wait(time.Second, "1000 handlers running", func() bool { return started.Load() == n })
		before := b.store.extendCalls.Load()
		time.Sleep(3 * lease / 3) // three ticks of the default interval, lease/3
		synctest.Wait()
		if got := b.store.extendCalls.Load() - before; got != 3 {
			t.Fatalf("extend calls over 3 ticks = %d, want 3", got)
		}
		b.store.mu.Lock()
		sizes := b.store.extendSizes
		b.store.mu.Unlock()
		for _, s := range sizes {
			if s != n {
				t.Fatalf("an extend call carried %d leases, want %d", s, n)
			}
		}
		close(release)
		b.wait(time.Second, "completions", b.completed(n))
	})
}

func TestOversizedReplyBecomesAnErrorReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := start(t, worker.Config{Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			if string(m.Body()) == "big" {
				m.SetReply(make([]byte, store.DefaultPayloadLimit))
			}
			return nil
		})})
		// Enqueued together so that their completions can share a batch.
		ids := b.enqueue(store.NewMessage{Payload: []byte("big"), ReplyTo: "replies"}, store.NewMessage{Payload: []byte("small"), ReplyTo: "replies"})
		b.wait(10*time.Second, "one request completed, one dead", func() bool {
			return b.completed(1)() && len(b.list(queue, store.Dead)) == 1
		})
		if d := b.list(queue, store.Dead)[0]; d.ID != ids[0] || !strings.Contains(d.LastError, "cannot complete") {
			t.Fatalf("the oversized request: %+v", d)
		}
		got := map[int64]worker.Reply{}
		for _, r := range b.list("replies", store.Pending) {
			rep, err := worker.DecodeReply(r.Payload)
			if err != nil {
				t.Fatal(err)
			}
			got[rep.RequestID] = rep
		}
		// The store refuses the oversized reply; retrying cannot help, so the
		// requester hears why at once, and the other request is unharmed.
		if r := got[ids[0]]; !strings.Contains(r.Error, "cannot complete") || r.Output != nil {
			t.Fatalf("reply to the oversized request: %+v", r)
		}
		if r := got[ids[1]]; r.Error != "" {
			t.Fatalf("reply to the small request: %+v", r)
		}
		for _, in := range append(b.list(queue, store.Completed), b.list(queue, store.Dead)...) {
			if in.Deliveries != 1 {
				t.Fatalf("message %d took %d deliveries, want 1", in.ID, in.Deliveries)
			}
		}
	})
}

func TestNotStartedGivesBackWithoutCounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		var mu sync.Mutex
		var attempts []int
		b := start(t, worker.Config{LeaseDuration: 3 * time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				mu.Lock()
				attempts = append(attempts, m.Attempt)
				mu.Unlock()
				if calls.Add(1) <= 5 {
					return worker.NotStarted(errors.New("exec: no such file"))
				}
				return nil
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 2})
		b.wait(time.Minute, "the message completed", b.completed(1))
		done := b.list(queue, store.Completed)[0]
		// Five starts failed on a message allowed two deliveries: none of
		// them counted.
		if done.Deliveries != 1 || len(b.list(queue, store.Dead)) != 0 {
			t.Fatalf("after five failed starts: %+v", done)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range attempts {
			if a != 1 {
				t.Fatalf("attempts %v, want every one the first", attempts)
			}
		}
	})
}

// A completion whose store call fails now and then is tried again: the
// handler that finished does not run a second time.
func TestCompletionRetriedAfterTransientErrors(t *testing.T) {
	for _, concurrency := range []int{1, 4} { // inline and through the completer
		t.Run(fmt.Sprint(concurrency), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStore(t)
				var failures atomic.Int64
				st.completeErr = func() error {
					if failures.Add(1) <= 2 {
						return errors.New("connection reset by peer")
					}
					return nil
				}
				var runs atomic.Int64
				b := start(t, worker.Config{Deps: with(st), Queues: queues(concurrency), LeaseDuration: 30 * time.Second,
					Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
						runs.Add(1)
						return nil
					})})
				b.enqueue(store.NewMessage{Payload: []byte("x")})
				b.wait(time.Minute, "the message completed", b.completed(1))
				if runs.Load() != 1 || b.list(queue, store.Completed)[0].Deliveries != 1 {
					t.Fatalf("the handler ran %d times, want once", runs.Load())
				}
			})
		})
	}
}

// A worker whose store was away for long tries again soon once it is
// back: the pause between failed receives is capped at a few seconds, so
// that work resumes promptly when a database returns (a standby promoted
// after a failover), however long the outage was.
func TestReceiveResumesSoonAfterALongOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const most = 5 * time.Second
		st := newStore(t)
		var down atomic.Bool
		down.Store(true)
		var mu sync.Mutex
		var tries []time.Time // while down
		st.claimErr = func() error {
			if down.Load() {
				mu.Lock()
				defer mu.Unlock()
				tries = append(tries, time.Now())
				return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
			}
			return nil
		}
		handled := make(chan time.Time, 1)
		b := start(t, worker.Config{Deps: with(st), Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			handled <- time.Now()
			return nil
		})})
		time.Sleep(time.Hour) // the outage
		synctest.Wait()       // the loop is paused between two tries
		down.Store(false)
		back := time.Now()
		b.enqueue(store.NewMessage{Payload: []byte("x")})
		if took := recv(t, handled, time.Minute).Sub(back); took > most {
			t.Fatalf("the message was handled %s after the store was back, want within %s", took, most)
		}
		mu.Lock()
		defer mu.Unlock()
		for i := 1; i < len(tries); i++ {
			if gap := tries[i].Sub(tries[i-1]); gap > most {
				t.Fatalf("tries %d and %d during the outage were %s apart, want %s at most", i, i+1, gap, most)
			}
		}
		if len(tries) < int(time.Hour/most) {
			t.Fatalf("%d tries in an hour's outage", len(tries))
		}
	})
}

// Retries stop when the lease would end first, and after a bounded number
// of calls: the reaper then redelivers the message.
func TestCompletionRetriesEndWithTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		var calls atomic.Int64
		broken := atomic.Bool{}
		broken.Store(true)
		st.completeErr = func() error {
			if broken.Load() {
				calls.Add(1)
				return errors.New("connection reset by peer")
			}
			return nil
		}
		runs := make(chan time.Time, 10)
		b := start(t, worker.Config{Deps: with(st), Queues: queues(1), LeaseDuration: 1500 * time.Millisecond,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				runs <- time.Now()
				if m.Attempt == 2 {
					broken.Store(false)
				}
				return nil
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x")})
		first := recv(t, runs, time.Minute)
		second := recv(t, runs, time.Minute)
		// The lease of 1.5 s leaves room for tries after 100, 200 and 400 ms,
		// not for one after 800 more.
		if n := calls.Load(); n != 4 {
			t.Fatalf("%d completion calls on the first delivery, want 4", n)
		}
		if second.Sub(first) < 1500*time.Millisecond {
			t.Fatalf("redelivered %s after the first run, before its lease ended", second.Sub(first))
		}
		b.wait(time.Minute, "the message completed", b.completed(1))
	})
}

func TestSnoozeRunsAgainLaterWithoutCounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs []time.Time
		var mu sync.Mutex
		b := start(t, worker.Config{LeaseDuration: 3 * time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				mu.Lock()
				defer mu.Unlock()
				runs = append(runs, time.Now())
				if len(runs) <= 3 {
					return worker.Snooze(10 * time.Second)
				}
				return nil
			})})
		b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 1})
		b.wait(time.Minute, "the message completed", b.completed(1))
		mu.Lock()
		defer mu.Unlock()
		if done := b.list(queue, store.Completed)[0]; done.Deliveries != 1 || len(runs) != 4 {
			t.Fatalf("after 3 snoozes: %d runs, %+v", len(runs), done)
		}
		for i := 1; i < len(runs); i++ {
			if gap := runs[i].Sub(runs[i-1]); gap < 10*time.Second || gap > 11*time.Second {
				t.Fatalf("run %d came %s after the one before, want 10 s", i+1, gap)
			}
		}
	})
}

func TestMaxProcessingTimeCancelsOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		causes := make(chan time.Duration, 1)
		start(t, worker.Config{LeaseDuration: lease, MaxProcessingTime: 5 * time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				t0 := time.Now()
				err := sleepCtx(ctx, time.Hour)
				if errors.Is(err, worker.ErrMaxProcessingTime) {
					causes <- time.Since(t0)
				}
				return err
			})}).enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 1})
		if took := recv(t, causes, time.Minute); took != 5*time.Second {
			t.Fatalf("cancelled after %s, want 5s", took)
		}
	})
}
