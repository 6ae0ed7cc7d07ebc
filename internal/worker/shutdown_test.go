package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

// runWorker builds and runs a worker without the cleanup of start, for
// tests that stop it themselves.
func runWorker(t *testing.T, st store.Store, cfg worker.Config) (*worker.Worker, chan error) {
	t.Helper()
	cfg.Deps = with(st)
	w := newWorker(t, cfg)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(context.Background()) }()
	return w, ran
}

func info(t *testing.T, st store.Store, id int64) store.Info {
	t.Helper()
	for _, s := range []store.State{store.Pending, store.Waiting, store.Processing, store.Completed, store.Dead} {
		infos, err := st.List(context.Background(), store.ListFilter{Queue: queue, State: s, Limit: store.MaxBatch})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.ID == id {
				return in
			}
		}
	}
	t.Fatalf("message %d not found", id)
	return store.Info{}
}

func enqueue(t *testing.T, st store.Store, n int) []int64 {
	t.Helper()
	msgs := make([]store.NewMessage, n)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: queue, Payload: []byte("x")}
	}
	res, err := st.Enqueue(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func TestGracefulShutdownDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		started := make(chan struct{})
		w, ran := runWorker(t, st, worker.Config{LeaseDuration: 3 * time.Second, MaxProcessingTime: time.Hour,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				close(started)
				return sleepCtx(ctx, 20*time.Second) // longer than the lease: the keeper runs during the drain
			})})
		id := enqueue(t, st, 1)[0]
		recv(t, started, time.Second)
		t0 := time.Now()
		if err := w.Shutdown(context.Background()); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if took := time.Since(t0); took != 20*time.Second {
			t.Fatalf("shutdown took %s, want the handler's remaining 20 s", took)
		}
		if err := <-ran; err != nil {
			t.Fatalf("run: %v", err)
		}
		if in := info(t, st, id); in.State != store.Completed {
			t.Fatalf("state %s after a graceful drain, want completed", in.State)
		}
		if w.Running() || !w.Draining() {
			t.Fatalf("after shutdown: running %v, draining %v", w.Running(), w.Draining())
		}
	})
}

func TestShutdownTimeoutReleasesLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		started := make(chan struct{}, 2)
		var causes sync.Map
		unblock := make(chan struct{})
		w, ran := runWorker(t, st, worker.Config{LeaseDuration: 30 * time.Second, ShutdownTimeout: 2 * time.Second, HardStopWait: time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				started <- struct{}{}
				if string(m.Key) == "stubborn" {
					<-unblock // ignores its context
					return nil
				}
				err := sleepCtx(ctx, time.Hour)
				causes.Store(m.MessageID, err)
				return err
			})})
		ids := enqueue(t, st, 1)
		res, err := st.Enqueue(context.Background(), []store.NewMessage{{Queue: queue, Key: "stubborn"}})
		if err != nil {
			t.Fatal(err)
		}
		stubborn := res[0].ID
		recv(t, started, time.Second)
		recv(t, started, time.Second)
		t0 := time.Now()
		err = w.Shutdown(context.Background())
		if !errors.Is(err, worker.ErrShutdown) {
			t.Fatalf("shutdown = %v, want ErrShutdown", err)
		}
		// Timeout 2 s, then up to 1 s for cancelled handlers.
		if took := time.Since(t0); took != 3*time.Second {
			t.Fatalf("shutdown took %s, want 3 s", took)
		}
		if err := <-ran; !errors.Is(err, worker.ErrShutdown) || !errors.Is(err, worker.ErrAbandoned) {
			t.Fatalf("run = %v, want ErrShutdown and ErrAbandoned", err)
		}
		if c, _ := causes.Load(ids[0]); c == nil || !errors.Is(c.(error), worker.ErrShutdown) {
			t.Fatalf("handler cause %v, want ErrShutdown", c)
		}
		// Both leases are released at once: the messages are pending again,
		// long before their 30 s lease would have ended.
		for _, id := range []int64{ids[0], stubborn} {
			if in := info(t, st, id); in.State != store.Pending || in.Deliveries != 1 {
				t.Fatalf("message %d: %s with %d deliveries, want pending with 1", id, in.State, in.Deliveries)
			}
		}
		// The abandoned handler's late return changes nothing.
		close(unblock)
		synctest.Wait()
		if in := info(t, st, stubborn); in.State != store.Pending {
			t.Fatalf("abandoned message: %s after its handler returned, want pending", in.State)
		}
		if n := st.completes.Load(); n != 0 {
			t.Fatalf("completions attempted: %d", n)
		}
	})
}

func TestHardStopOnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		started := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		w := newWorker(t, worker.Config{Deps: with(st),
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				close(started)
				return sleepCtx(ctx, time.Hour)
			})})
		ran := make(chan error, 1)
		go func() { ran <- w.Run(ctx) }()
		id := enqueue(t, st, 1)[0]
		recv(t, started, time.Second)
		cancel()
		if err := recv(t, ran, time.Second); !errors.Is(err, worker.ErrShutdown) {
			t.Fatalf("run = %v, want ErrShutdown", err)
		}
		if in := info(t, st, id); in.State != store.Pending {
			t.Fatalf("state %s after a hard stop, want pending", in.State)
		}
	})
}

func TestShutdownBeforeRunAndTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		w := newWorker(t, worker.Config{Deps: with(st),
			Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })})
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := w.Shutdown(context.Background()); err != nil {
					t.Errorf("shutdown before run: %v", err)
				}
			})
		}
		wg.Wait()
		enqueue(t, st, 1)
		if err := w.Run(context.Background()); err != nil {
			t.Fatalf("run after shutdown: %v", err)
		}
		if w.Running() {
			t.Fatal("the worker ran after Shutdown")
		}
		if in, _ := st.Stats(context.Background(), queue); in.Pending != 1 {
			t.Fatalf("pending %d, want the message untouched", in.Pending)
		}
		// A second Run is refused.
		w2, ran := runWorker(t, st, worker.Config{Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })})
		synctest.Wait()
		if err := w2.Run(context.Background()); !errors.Is(err, runstate.ErrAlreadyRun) {
			t.Fatalf("second Run = %v, want ErrAlreadyRun", err)
		}
		for range 2 {
			wg.Go(func() {
				if err := w2.Shutdown(context.Background()); err != nil {
					t.Errorf("concurrent shutdown: %v", err)
				}
			})
		}
		wg.Wait()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
	})
}

// gatedStore holds claims at a gate, so a test can stop the worker while a
// claim is on its way.
type gatedStore struct {
	*spyStore
	gate chan struct{}
}

func (g *gatedStore) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	<-g.gate
	return g.spyStore.Claim(context.WithoutCancel(ctx), c)
}

func TestUnstartedMessagesReleasedUncounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spy := newStore(t)
		st := &gatedStore{spyStore: spy, gate: make(chan struct{})}
		ids := enqueue(t, spy, 3)
		var handled sync.Map
		w := newWorker(t, worker.Config{Deps: with(st),
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				handled.Store(m.MessageID, true)
				return nil
			})})
		ran := make(chan error, 1)
		go func() { ran <- w.Run(context.Background()) }()
		synctest.Wait() // the worker waits at the gate with its claim
		shut := make(chan error, 1)
		go func() { shut <- w.Shutdown(context.Background()) }()
		synctest.Wait()
		close(st.gate)
		if err := recv(t, shut, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, ok := handled.Load(id); ok {
				t.Fatalf("message %d was handled after shutdown began", id)
			}
			if in := info(t, spy, id); in.State != store.Pending || in.Deliveries != 0 {
				t.Fatalf("message %d: %s with %d deliveries, want pending with 0", id, in.State, in.Deliveries)
			}
		}
	})
}

// hangingStore never answers Release until its context ends.
type hangingStore struct{ *spyStore }

func (h *hangingStore) Release(ctx context.Context, r store.Release) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestShutdownKeepsToItsContextWhenTheStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spy := newStore(t)
		st := &hangingStore{spy}
		unblock := make(chan struct{})
		defer close(unblock)
		const lease = 10 * time.Second
		w := newWorker(t, worker.Config{Deps: with(st), LeaseDuration: lease, HardStopWait: time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				<-unblock // ignores its context
				return nil
			})})
		ran := make(chan error, 1)
		go func() { ran <- w.Run(context.Background()) }()
		enqueue(t, spy, 1)
		synctest.Wait()
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("shutdown = %v, want its context's deadline", err)
		}
		if took := time.Since(t0); took != 2*time.Second {
			t.Fatalf("shutdown took %s with a 2 s context", took)
		}
		// Run ends once the hanging release times out with the lease.
		err := recv(t, ran, time.Minute)
		if !errors.Is(err, worker.ErrAbandoned) {
			t.Fatalf("run = %v, want ErrAbandoned", err)
		}
		if took := time.Since(t0); took != 2*time.Second+time.Second+time.Second {
			t.Fatalf("run ended after %s, want 2 s + HardStopWait 1 s + the release's HardStopWait-long timeout", took)
		}
	})
}

// closingClaims is a store whose claims fail with store.ErrClosed after
// the first, as when the store is closed under a running worker.
type closingClaims struct {
	*spyStore
	claims atomic.Int32
}

func (c *closingClaims) Claim(ctx context.Context, cl store.Claim) ([]store.Delivery, error) {
	if c.claims.Add(1) > 1 {
		return nil, fmt.Errorf("claim: %w", store.ErrClosed)
	}
	return c.spyStore.Claim(ctx, cl)
}

// A claim loop that ends by itself drains the worker, and the drain keeps
// to ShutdownTimeout as a Shutdown's does.
func TestALoopsEndDrainsWithinTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &closingClaims{spyStore: newStore(t)}
		unblock := make(chan struct{})
		defer close(unblock)
		id := enqueue(t, st, 1)[0]
		w := newWorker(t, worker.Config{Deps: with(st), Queues: queues(2), ShutdownTimeout: time.Second, HardStopWait: time.Second,
			Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				<-unblock
				return nil
			})})
		t0 := time.Now()
		err := w.Run(context.Background())
		if !errors.Is(err, store.ErrClosed) || !errors.Is(err, worker.ErrAbandoned) {
			t.Fatalf("run = %v, want ErrClosed and ErrAbandoned", err)
		}
		if took := time.Since(t0); took != 2*time.Second {
			t.Fatalf("run took %s, want ShutdownTimeout + HardStopWait = 2 s", took)
		}
		if in := info(t, st, id); in.State != store.Pending {
			t.Fatalf("state %s, want the abandoned message released", in.State)
		}
	})
}

func TestStopIsAHardStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		causes := make(chan error, 1)
		w, ran := runWorker(t, st, worker.Config{Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			err := sleepCtx(ctx, time.Hour)
			causes <- err
			return err
		})})
		id := enqueue(t, st, 1)[0]
		synctest.Wait()
		w.Stop()
		if err := recv(t, causes, time.Second); !errors.Is(err, worker.ErrShutdown) {
			t.Fatalf("cause = %v, want ErrShutdown", err)
		}
		if err := <-ran; !errors.Is(err, worker.ErrShutdown) {
			t.Fatalf("run = %v, want ErrShutdown", err)
		}
		if in := info(t, st, id); in.State != store.Pending {
			t.Fatalf("state %s after Stop, want pending", in.State)
		}
	})
}

// stuckClaims holds every claim until its context ends, as a claim on a
// database that stopped answering does.
type stuckClaims struct {
	*spyStore
	claiming chan struct{}
}

func (s *stuckClaims) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	select {
	case s.claiming <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A claim that hangs does not hold up a graceful drain's hard stop: Stop
// cuts it short and returns.
func TestHardStopCutsAStuckClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stuckClaims{spyStore: newStore(t), claiming: make(chan struct{}, 1)}
		w, ran := runWorker(t, st, worker.Config{Handler: worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })})
		recv(t, st.claiming, time.Second)
		shutdown := make(chan error, 1)
		go func() { shutdown <- w.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-shutdown:
			t.Fatalf("Shutdown returned %v while a claim was under way; a drain must not cut it short", err)
		default:
		}
		go w.Stop()
		if err := recv(t, ran, time.Minute); err != nil {
			t.Fatalf("run = %v, want nil: no handler was running", err)
		}
		<-shutdown
	})
}
