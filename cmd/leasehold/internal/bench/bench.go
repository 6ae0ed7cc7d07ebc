// Package bench measures leasehold on a store: clients in this process
// work a queue of their own while a producer keeps it topped up, offers a
// steady rate, or enqueues a batch to burn down.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// Config is one run's settings; the command checks them.
type Config struct {
	// Duration is how long a continuous or offered-load run lasts.
	Duration time.Duration
	// Messages, when positive, makes the run a burn-down of that many.
	Messages int
	// Workers clients, each running Concurrency handlers.
	Workers, Concurrency int
	// Payload is each message's size in bytes.
	Payload int
	// Keys spreads messages over this many ordering keys; 0: no keys.
	Keys int
	// HandlerTime is how long each handler runs.
	HandlerTime time.Duration
	// Rate, when positive, offers this many messages per second.
	Rate int
	// Lease is the lease each message is claimed under.
	Lease time.Duration
	// CompletedRetention is the clients' (see leasehold.Config); zero: the
	// default.
	CompletedRetention time.Duration
}

// Result is what a run measured; `bench --json` prints it.
type Result struct {
	DB                  string  `json:"db"`
	Mode                string  `json:"mode"`
	Workers             int     `json:"workers"`
	Concurrency         int     `json:"concurrency"`
	Messages            int64   `json:"messages"`
	Seconds             float64 `json:"seconds"`
	MessagesPerSecond   float64 `json:"messages_per_second"`
	LatencyP50Ms        float64 `json:"latency_p50_ms"`
	LatencyP95Ms        float64 `json:"latency_p95_ms"`
	LatencyP99Ms        float64 `json:"latency_p99_ms"`
	ExtensionsPerSecond float64 `json:"extensions_per_second"`
	Errors              int64   `json:"errors"`
}

// countingStore counts lease extensions.
type countingStore struct {
	store.Store
	extended atomic.Int64
}

func (c *countingStore) Extend(ctx context.Context, ls []store.Lease, d time.Duration) (store.Extended, error) {
	res, err := c.Store.Extend(ctx, ls, d)
	if err == nil {
		c.extended.Add(int64(len(ls) - len(res.Lost)))
	}
	return res, err
}

// latencies collects enqueue-to-start latencies in shards, so that
// concurrent handlers seldom wait for each other's lock.
type latencies struct {
	shards [latencyShards]latencyShard
}

const latencyShards = 64

type latencyShard struct {
	mu sync.Mutex
	us []int64
	_  [32]byte // keep shards on separate cache lines
}

// add records d; key spreads the records over the shards.
func (l *latencies) add(key int64, d time.Duration) {
	s := &l.shards[uint64(key)%latencyShards]
	s.mu.Lock()
	s.us = append(s.us, d.Microseconds())
	s.mu.Unlock()
}

func (l *latencies) quantiles() (p50, p95, p99 float64) {
	var us []int64
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		us = append(us, s.us...)
		s.mu.Unlock()
	}
	if len(us) == 0 {
		return 0, 0, 0
	}
	slices.Sort(us)
	q := func(p float64) float64 { return float64(us[min(len(us)-1, int(p*float64(len(us))))]) / 1000 }
	return q(0.50), q(0.95), q(0.99)
}

// Run runs one measurement on st, on a queue of its own that it deletes at
// the end, until the duration passes, the burn-down is done or ctx ends.
// progress, when set, is called every second. Result.DB is left empty.
func Run(ctx context.Context, st store.Store, f Config, log *slog.Logger, progress func(elapsed time.Duration, done, errors int64)) (Result, error) {
	counting := &countingStore{Store: st}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	queue := "leasehold-bench-" + hex.EncodeToString(suffix[:])
	defer func() {
		if _, err := st.DeleteQueue(context.WithoutCancel(ctx), queue); err != nil {
			log.Error("could not delete the bench queue", "queue", queue, "error", err)
		}
	}()

	clk := clock.System()
	payload := make([]byte, f.Payload)
	for i := range payload {
		payload[i] = 'x'
	}
	var seq, enqueued atomic.Int64
	// Without keys every batch is the same, made once (Enqueue keeps no
	// reference to it), as bench/river makes River's.
	same := make([]store.NewMessage, 1000)
	for i := range same {
		same[i] = store.NewMessage{Queue: queue, Payload: payload}
	}
	newBatch := func(n int) []store.NewMessage {
		enqueued.Add(int64(n))
		if f.Keys == 0 {
			return same[:n]
		}
		msgs := make([]store.NewMessage, n)
		for i := range msgs {
			msgs[i] = store.NewMessage{Queue: queue, Payload: payload, Key: fmt.Sprintf("k%d", seq.Add(1)%int64(f.Keys))}
		}
		return msgs
	}
	mode := "continuous"
	if f.Messages > 0 {
		mode = "burn-down"
		for left := f.Messages; left > 0; left -= 1000 {
			if _, err := st.Enqueue(ctx, newBatch(min(left, 1000))); err != nil {
				return Result{}, err
			}
		}
	} else if f.Rate > 0 {
		mode = fmt.Sprintf("offered %d/s", f.Rate)
	}

	// target is the backlog the producer keeps in continuous mode; low
	// wakes it when the backlog falls below half of that.
	target := int64(max(2*f.Workers*f.Concurrency, 1000))
	low := make(chan struct{}, 1)
	lat := &latencies{}
	var done, failures atomic.Int64
	allDone := make(chan struct{})
	var allOnce sync.Once
	handler := func(ctx context.Context, job *leasehold.RawJob) error {
		lat.add(job.ID, clk.Now().Sub(job.EnqueuedAt))
		if f.HandlerTime > 0 {
			t := clk.NewTimer(f.HandlerTime)
			defer t.Stop()
			select {
			case <-t.C():
			case <-ctx.Done():
				failures.Add(1)
				return context.Cause(ctx)
			}
		}
		n := done.Add(1)
		if f.Messages > 0 && n == int64(f.Messages) {
			allOnce.Do(func() { close(allDone) })
		}
		if f.Messages == 0 && f.Rate == 0 && enqueued.Load()-n < target/2 {
			// The backlog fell below half the target: wake the producer
			// rather than leave the workers idle until its next tick.
			select {
			case low <- struct{}{}:
			default:
			}
		}
		return nil
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	// Each worker is a client of its own, with its own reaper, as separate
	// processes would be.
	var clients []*leasehold.Client[store.NoTx]
	for range f.Workers {
		c, err := leasehold.NewClient[store.NoTx](store.WithoutTx(counting), leasehold.Config{
			Queues:        map[string]leasehold.QueueConfig{queue: {Concurrency: f.Concurrency}},
			LeaseDuration: f.Lease, CompletedRetention: f.CompletedRetention, Logger: quiet})
		if err != nil {
			return Result{}, err
		}
		c.HandleAny(handler)
		clients = append(clients, c)
	}
	began := clk.Monotonic()
	for _, c := range clients {
		if err := c.Start(runCtx); err != nil {
			return Result{}, err
		}
	}
	// The producer for continuous and offered-load modes.
	prodCtx, stopProducer := context.WithCancel(runCtx)
	defer stopProducer()
	var prod sync.WaitGroup
	if f.Messages == 0 {
		prod.Go(func() {
			produce(prodCtx, st, f, log, newBatch, target, low, func() int64 { return enqueued.Load() - done.Load() }, &failures)
		})
	}
	tick := clk.NewTicker(time.Second)
	var end <-chan time.Time
	if f.Messages == 0 {
		end = clk.NewTimer(f.Duration).C()
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-allDone:
			break loop
		case <-end:
			break loop
		case <-tick.C():
			if progress != nil {
				progress(clk.Monotonic()-began, done.Load(), failures.Load())
			}
		}
	}
	tick.Stop()
	elapsed := clk.Monotonic() - began
	completed := done.Load()
	stopProducer()
	prod.Wait()
	for _, c := range clients {
		if err := c.Stop(context.WithoutCancel(ctx)); err != nil {
			failures.Add(1)
		}
	}
	stopRun()
	p50, p95, p99 := lat.quantiles()
	return Result{Mode: mode, Workers: f.Workers, Concurrency: f.Concurrency, Messages: completed, Seconds: elapsed.Seconds(),
		MessagesPerSecond: float64(completed) / elapsed.Seconds(), LatencyP50Ms: p50, LatencyP95Ms: p95, LatencyP99Ms: p99,
		ExtensionsPerSecond: float64(counting.extended.Load()) / elapsed.Seconds(), Errors: failures.Load()}, nil
}

// produce keeps the queue topped up (continuous mode) or offers f.Rate
// messages per second, until ctx ends.
// backlog tells how many enqueued messages are not done yet.
func produce(ctx context.Context, st store.Store, f Config, log *slog.Logger, newBatch func(int) []store.NewMessage, target int64, low <-chan struct{}, backlog func() int64, failures *atomic.Int64) {
	clk := clock.System()
	if f.Rate > 0 {
		// Every millisecond, enqueue what the rate owes by then: single
		// messages at low rates, small batches when one enqueue takes
		// longer than the gap between messages.
		began := clk.Monotonic()
		var sent int64
		t := clk.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			owed := int64((clk.Monotonic()-began).Seconds()*float64(f.Rate)) - sent
			if owed > 0 {
				n := int(min(owed, 1000))
				if _, err := st.Enqueue(ctx, newBatch(n)); err != nil && ctx.Err() == nil {
					failures.Add(1)
				}
				sent += int64(n)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
		}
	}
	t := clk.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if b := backlog(); b < target {
			for n := target - b; n > 0 && ctx.Err() == nil; n -= 1000 {
				if _, err := st.Enqueue(ctx, newBatch(int(min(n, 1000)))); err != nil && ctx.Err() == nil {
					failures.Add(1)
					log.Error("bench enqueue failed", "error", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-low:
		}
	}
}
