package worker_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

// runLog records the handlers' runs of keyed messages: their payloads and
// attempts in the order they started, and whether two ever overlapped.
type runLog struct {
	mu      sync.Mutex
	runs    []string
	running int
	overlap bool
}

// handler records each run and then returns what do says for it.
func (l *runLog) handler(do func(ctx context.Context, msg *worker.Message) error) worker.HandlerFunc {
	return func(ctx context.Context, msg *worker.Message) error {
		l.mu.Lock()
		l.runs = append(l.runs, string(msg.Payload)+"#"+string(rune('0'+msg.Attempt)))
		l.running++
		l.overlap = l.overlap || l.running > 1
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			l.running--
			l.mu.Unlock()
		}()
		return do(ctx, msg)
	}
}

func (l *runLog) want(t *testing.T, want ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Equal(l.runs, want) || l.overlap {
		t.Fatalf("ran %q (overlapping: %v), want %q one at a time", l.runs, l.overlap, want)
	}
}

// keyed returns n messages of key K, their payloads "1" to n.
func keyed(n int) []store.NewMessage {
	msgs := make([]store.NewMessage, n)
	for i := range msgs {
		msgs[i] = store.NewMessage{Key: "K", Payload: []byte{byte('1' + i)}}
	}
	return msgs
}

// runsOf is a queue with runs and n slots.
func runsOf(n int) []worker.QueueConfig {
	return []worker.QueueConfig{{Name: queue, Concurrency: n, Runs: true}}
}

// A queue with runs takes a key's messages in one claim and runs them one
// at a time, in order, each as soon as the one before it is done, not at
// the claim loop's next look; those that wait keep their leases, renewed
// with the running one's, however long it runs.
func TestRunsRunInOrderUnderTheirLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log runLog
		began := time.Now()
		var last time.Duration
		b := start(t, worker.Config{Queues: runsOf(5), Handler: log.handler(func(ctx context.Context, msg *worker.Message) error {
			switch string(msg.Payload) {
			case "1":
				time.Sleep(70 * time.Second) // past two leases of 30 s
			case "4":
				last = time.Since(began)
			}
			return nil
		})})
		b.enqueue(keyed(4)...)
		b.wait(time.Minute*5, "four completed", b.completed(4))
		log.want(t, "1#1", "2#1", "3#1", "4#1")
		if last != 70*time.Second {
			t.Fatalf("the last of the run started %s after the first, want 70s: when the one before it was done", last)
		}
		b.store.mu.Lock()
		defer b.store.mu.Unlock()
		if !slices.Equal(b.store.claimSizes, []int{4}) {
			t.Fatalf("claims took %v messages, want the run of four in one", b.store.claimSizes)
		}
	})
}

// A message of a run that fails and will be retried, or is snoozed, gives
// back the rest of its run: they run after it again, in order, on new
// leases, their deliveries not used up.
func TestRunsGiveBackTheRestOfARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log runLog
		snoozed := false
		b := start(t, worker.Config{Queues: runsOf(5), Handler: log.handler(func(ctx context.Context, msg *worker.Message) error {
			switch {
			case string(msg.Payload) == "2" && msg.Attempt == 1:
				return errors.New("boom")
			case string(msg.Payload) == "3" && !snoozed:
				snoozed = true // runs are one at a time: no race
				return worker.Snooze(time.Minute)
			}
			return nil
		})})
		ids := b.enqueue(keyed(4)...)
		b.wait(time.Minute*5, "four completed", b.completed(4))
		log.want(t, "1#1", "2#1", "2#2", "3#1", "3#1", "4#1")
		for i, want := range []int{1, 2, 1, 1} {
			if in := info(t, b.store, ids[i]); in.Deliveries != want {
				t.Fatalf("message %d: %d deliveries, want %d", i+1, in.Deliveries, want)
			}
		}
	})
}

// A message of a run that is dead-lettered, or cancelled while it waits,
// lets the rest of the run go on.
func TestRunsGoOnPastTheDeadAndTheCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log runLog
		release := make(chan struct{})
		b := start(t, worker.Config{Queues: runsOf(5), Handler: log.handler(func(ctx context.Context, msg *worker.Message) error {
			if string(msg.Payload) == "1" {
				<-release
				return worker.Permanent(errors.New("no"))
			}
			return nil
		})})
		ids := b.enqueue(keyed(3)...)
		synctest.Wait()
		if _, err := b.store.Cancel(context.Background(), queue, ids[1:2]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(15 * time.Second) // a heartbeat tells the worker
		close(release)
		b.wait(time.Minute, "the last completed", b.completed(1))
		log.want(t, "1#1", "3#1")
		if in := info(t, b.store, ids[0]); in.State != store.Dead {
			t.Fatalf("the first: %v, want dead", in.State)
		}
	})
}

// A stop gives back at once, uncounted, the messages of a run that wait,
// while the running one finishes.
func TestRunsShutdownGivesBackTheWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log runLog
		release := make(chan struct{})
		st := newStore(t)
		w := newWorker(t, worker.Config{Deps: with(st), Queues: runsOf(5), Handler: log.handler(func(ctx context.Context, msg *worker.Message) error {
			<-release
			return nil
		})})
		ran := make(chan error, 1)
		go func() { ran <- w.Run(context.Background()) }()
		res, err := st.Enqueue(context.Background(), []store.NewMessage{{Queue: queue, Key: "K", Payload: []byte("1")},
			{Queue: queue, Key: "K", Payload: []byte("2")}, {Queue: queue, Key: "K", Payload: []byte("3")}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		stopped := make(chan error, 1)
		go func() { stopped <- w.Shutdown(context.Background()) }()
		synctest.Wait()
		for _, r := range res[1:] {
			if in := info(t, st, r.ID); in.State != store.Waiting || in.Deliveries != 0 {
				t.Fatalf("a waiting message of the run while the first runs on: %v with %d deliveries, want waiting and uncounted", in.State, in.Deliveries)
			}
		}
		close(release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		log.want(t, "1#1")
		if in := info(t, st, res[0].ID); in.State != store.Completed {
			t.Fatalf("the running one: %v, want completed", in.State)
		}
		if in := info(t, st, res[1].ID); in.State != store.Pending || in.Deliveries != 0 {
			t.Fatalf("the next: %v with %d deliveries, want pending and uncounted", in.State, in.Deliveries)
		}
	})
}

// A message of a run whose completion fails, so that it will run again
// once its lease has expired, gives the rest of its run back itself: they
// wait, uncounted, and run after it, in order.
func TestRunsGiveBackTheRestOfAnUnsettledMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log runLog
		st := newStore(t)
		var failures atomic.Int32
		st.completeErr = func() error {
			if failures.Load() < 5 { // every try of the first completion
				failures.Add(1)
				return errors.New("connection reset")
			}
			return nil
		}
		b := start(t, worker.Config{Deps: with(st), Queues: runsOf(5), Handler: log.handler(func(context.Context, *worker.Message) error { return nil })})
		ids := b.enqueue(keyed(3)...)
		b.wait(time.Minute, "the first's completion given up", func() bool { return failures.Load() == 5 })
		synctest.Wait()
		for _, id := range ids[1:] {
			if in := info(t, st, id); in.State != store.Waiting || in.Deliveries != 0 {
				t.Fatalf("the rest of the run: %v with %d deliveries, want waiting and uncounted", in.State, in.Deliveries)
			}
		}
		b.wait(5*time.Minute, "three completed", b.completed(3))
		log.want(t, "1#1", "1#2", "2#1", "3#1")
	})
}
