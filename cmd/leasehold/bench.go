package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/anyjob"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

type benchFlags struct {
	duration    time.Duration
	messages    int
	workers     int
	concurrency int
	payload     int
	keys        int
	handlerTime time.Duration
	rate        int
	lease       time.Duration
	asJSON      bool
}

// benchResult is what `bench --json` prints.
type benchResult struct {
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

func (a *app) benchCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench [--duration DUR | --messages N] [flags]",
		Short: "Measure throughput and latency on a database",
		Long: `bench runs workers in this process, each a client of its own as separate
processes would be, against the database and reports throughput
(messages/s), enqueue-to-start latency (p50, p95, p99), lease extensions
per second and errors. Leases and heartbeats are on.

Continuous mode (--duration, the default) keeps the queue topped up for the
duration; burn-down mode (--messages N) enqueues N messages, then drains
them; --rate offers a steady load instead, for latency at a given rate. It
works on a queue of its own and deletes it at the end, also when a signal
ends the run early. --db memory: measures the in-memory store.`,
		Example: `  leasehold bench --duration 10s
  leasehold --db postgres://localhost/app bench --messages 100000 --workers 4 --concurrency 50 --json
  leasehold bench --duration 20s --rate 1000`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			a.memoryOK = true
			// A signal ends the run early; the queue is still deleted.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return a.bench(ctx, f)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "continuous mode: how long to run")
	fl.IntVar(&f.messages, "messages", 0, "burn-down mode: enqueue this many, then drain")
	fl.IntVar(&f.workers, "workers", 2, "workers in this process, each a client of its own")
	fl.IntVar(&f.concurrency, "concurrency", 50, "handlers per worker")
	fl.IntVar(&f.payload, "payload", 100, "payload size in bytes")
	fl.IntVar(&f.keys, "keys", 0, "spread messages over this many ordering keys (0: no keys)")
	fl.DurationVar(&f.handlerTime, "handler-time", 0, "how long each handler runs")
	fl.IntVar(&f.rate, "rate", 0, "offer this many messages per second instead of keeping the queue full")
	fl.DurationVar(&f.lease, "lease", worker.DefaultLeaseDuration, "lease duration; heartbeats every third of it")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object")
	return cmd
}

func (f benchFlags) check(cmd *cobra.Command) error {
	if cmd.Flags().Changed("duration") && cmd.Flags().Changed("messages") {
		return usagef("--duration and --messages exclude each other")
	}
	switch {
	case f.duration <= 0:
		return usagef("--duration %s: must be positive", f.duration)
	case f.messages < 0:
		return usagef("--messages %d: must not be negative", f.messages)
	case f.workers < 1 || f.workers > 1000:
		return usagef("--workers %d: must be 1 to 1000", f.workers)
	case f.concurrency < 1 || f.concurrency > store.MaxBatch:
		return usagef("--concurrency %d: must be 1 to %d", f.concurrency, store.MaxBatch)
	case f.payload < 0 || f.payload > store.DefaultPayloadLimit:
		return usagef("--payload %d: must be 0 to %d", f.payload, store.DefaultPayloadLimit)
	case f.keys < 0:
		return usagef("--keys %d: must not be negative", f.keys)
	case f.handlerTime < 0:
		return usagef("--handler-time %s: must not be negative", f.handlerTime)
	case f.rate < 0:
		return usagef("--rate %d: must not be negative", f.rate)
	case f.rate > 0 && f.messages > 0:
		return usagef("--rate and --messages exclude each other")
	case f.lease < worker.MinLeaseDuration:
		return usagef("--lease %s: must be at least %s (heartbeats every third of a shorter lease cannot keep it)", f.lease, worker.MinLeaseDuration)
	}
	return nil
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

func (a *app) bench(ctx context.Context, f benchFlags) error {
	db := a.dsn.String()
	st, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	counting := &countingStore{Store: st}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	queue := "leasehold-bench-" + hex.EncodeToString(suffix[:])
	defer func() {
		if _, err := st.DeleteQueue(context.WithoutCancel(ctx), queue); err != nil {
			a.log.Error("could not delete the bench queue", "queue", queue, "error", err)
		}
	}()

	clk := clock.System()
	payload := make([]byte, f.payload)
	for i := range payload {
		payload[i] = 'x'
	}
	var seq, enqueued atomic.Int64
	newBatch := func(n int) []store.NewMessage {
		enqueued.Add(int64(n))
		msgs := make([]store.NewMessage, n)
		for i := range msgs {
			msgs[i] = store.NewMessage{Queue: queue, Payload: payload}
			if f.keys > 0 {
				msgs[i].Key = fmt.Sprintf("k%d", seq.Add(1)%int64(f.keys))
			}
		}
		return msgs
	}
	mode := "continuous"
	if f.messages > 0 {
		mode = "burn-down"
		for left := f.messages; left > 0; left -= 1000 {
			if _, err := st.Enqueue(ctx, newBatch(min(left, 1000))); err != nil {
				return err
			}
		}
	} else if f.rate > 0 {
		mode = fmt.Sprintf("offered %d/s", f.rate)
	}

	// target is the backlog the producer keeps in continuous mode; low
	// wakes it when the backlog falls below half of that.
	target := int64(max(2*f.workers*f.concurrency, 1000))
	low := make(chan struct{}, 1)
	lat := &latencies{}
	var done, failures atomic.Int64
	allDone := make(chan struct{})
	var allOnce sync.Once
	handler := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		lat.add(m.MessageID, clk.Now().Sub(m.EnqueuedAt))
		if f.handlerTime > 0 {
			t := clk.NewTimer(f.handlerTime)
			defer t.Stop()
			select {
			case <-t.C():
			case <-ctx.Done():
				failures.Add(1)
				return context.Cause(ctx)
			}
		}
		n := done.Add(1)
		if f.messages > 0 && n == int64(f.messages) {
			allOnce.Do(func() { close(allDone) })
		}
		if f.messages == 0 && f.rate == 0 && enqueued.Load()-n < target/2 {
			// The backlog fell below half the target: wake the producer
			// rather than leave the workers idle until its next tick.
			select {
			case low <- struct{}{}:
			default:
			}
		}
		return nil
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	// Each worker is a client of its own, with its own reaper, as separate
	// processes would be.
	var clients []*leasehold.Client[store.NoTx]
	for range f.workers {
		c, err := leasehold.NewClient[store.NoTx](plainStore{counting}, leasehold.Config{
			Queues:        map[string]leasehold.QueueConfig{queue: {Concurrency: f.concurrency}},
			LeaseDuration: f.lease, Logger: quiet})
		if err != nil {
			return err
		}
		anyjob.Handle(c, handler)
		clients = append(clients, c)
	}
	began := clk.Monotonic()
	for _, c := range clients {
		if err := c.Start(runCtx); err != nil {
			return err
		}
	}
	// The producer for continuous and offered-load modes.
	prodCtx, stopProducer := context.WithCancel(runCtx)
	defer stopProducer()
	var prod sync.WaitGroup
	if f.messages == 0 {
		prod.Go(func() {
			a.produce(prodCtx, st, f, newBatch, target, low, func() int64 { return enqueued.Load() - done.Load() }, &failures)
		})
	}
	progress := newProgress(a.stdout)
	tick := clk.NewTicker(time.Second)
	var end <-chan time.Time
	if f.messages == 0 {
		end = clk.NewTimer(f.duration).C()
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
			if progress.tty && !f.asJSON {
				el := (clk.Monotonic() - began).Seconds()
				fmt.Fprintf(a.stdout, "\r%6.1fs  %d messages  %.0f/s  errors %d   ", el, done.Load(), float64(done.Load())/el, failures.Load())
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
	if progress.tty && !f.asJSON {
		fmt.Fprintln(a.stdout)
	}
	p50, p95, p99 := lat.quantiles()
	res := benchResult{DB: db, Mode: mode, Workers: f.workers, Concurrency: f.concurrency, Messages: completed, Seconds: elapsed.Seconds(),
		MessagesPerSecond: float64(completed) / elapsed.Seconds(), LatencyP50Ms: p50, LatencyP95Ms: p95, LatencyP99Ms: p99,
		ExtensionsPerSecond: float64(counting.extended.Load()) / elapsed.Seconds(), Errors: failures.Load()}
	if f.asJSON {
		return json.NewEncoder(a.stdout).Encode(res)
	}
	fmt.Fprintf(a.stdout, "%s, %s, %d workers x %d: %d messages in %.2fs: %.0f messages/s\n", res.DB, res.Mode, res.Workers, res.Concurrency,
		res.Messages, res.Seconds, res.MessagesPerSecond)
	fmt.Fprintf(a.stdout, "enqueue-to-start latency: p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", p50, p95, p99)
	fmt.Fprintf(a.stdout, "lease extensions: %.1f/s; errors: %d\n", res.ExtensionsPerSecond, res.Errors)
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return nil
}

// produce keeps the queue topped up (continuous mode) or offers f.rate
// messages per second, until ctx ends.
// backlog tells how many enqueued messages are not done yet.
func (a *app) produce(ctx context.Context, st store.Store, f benchFlags, newBatch func(int) []store.NewMessage, target int64, low <-chan struct{}, backlog func() int64, failures *atomic.Int64) {
	clk := clock.System()
	if f.rate > 0 {
		// Every millisecond, enqueue what the rate owes by then: single
		// messages at low rates, small batches when one enqueue takes
		// longer than the gap between messages.
		began := clk.Monotonic()
		var sent int64
		t := clk.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			owed := int64((clk.Monotonic()-began).Seconds()*float64(f.rate)) - sent
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
					a.log.Error("bench enqueue failed", "error", err)
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
