package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/bench"
	"github.com/leasehold/leasehold/internal/maintenance"
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
	retain      retention
}

func (a *app) benchCommand() *cobra.Command {
	f := benchFlags{retain: retention{maintenance.DefaultCompletedRetention}}
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
	fl.IntVar(&f.workers, "workers", 1, "workers in this process, each a client of its own")
	fl.IntVar(&f.concurrency, "concurrency", 2000, "handlers per worker")
	fl.IntVar(&f.payload, "payload", 100, "payload size in bytes")
	fl.IntVar(&f.keys, "keys", 0, "spread messages over this many ordering keys (0: no keys)")
	fl.DurationVar(&f.handlerTime, "handler-time", 0, "how long each handler runs")
	fl.IntVar(&f.rate, "rate", 0, "offer this many messages per second instead of keeping the queue full")
	fl.DurationVar(&f.lease, "lease", worker.DefaultLeaseDuration, "lease duration; heartbeats every third of it")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object")
	fl.Var(&f.retain, "retain-completed", "the workers' retention of completed messages, as work's (or forever: no cleaning)")
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

func (a *app) bench(ctx context.Context, f benchFlags) error {
	st, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	var progress func(time.Duration, int64, int64)
	if newProgress(a.stdout).tty && !f.asJSON {
		progress = func(elapsed time.Duration, done, errs int64) {
			fmt.Fprintf(a.stdout, "\r%6.1fs  %d messages  %.0f/s  errors %d   ", elapsed.Seconds(), done, float64(done)/elapsed.Seconds(), errs)
		}
	}
	res, err := bench.Run(ctx, st, bench.Config{Duration: f.duration, Messages: f.messages, Workers: f.workers, Concurrency: f.concurrency,
		Payload: f.payload, Keys: f.keys, HandlerTime: f.handlerTime, Rate: f.rate, Lease: f.lease,
		CompletedRetention: f.retain.d}, a.log, progress)
	if err != nil {
		return err
	}
	res.DB = a.dsn.String()
	if progress != nil {
		fmt.Fprintln(a.stdout)
	}
	if f.asJSON {
		return json.NewEncoder(a.stdout).Encode(res)
	}
	fmt.Fprintf(a.stdout, "%s, %s, %d workers x %d: %d messages in %.2fs: %.0f messages/s\n", res.DB, res.Mode, res.Workers, res.Concurrency,
		res.Messages, res.Seconds, res.MessagesPerSecond)
	fmt.Fprintf(a.stdout, "enqueue-to-start latency: p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", res.LatencyP50Ms, res.LatencyP95Ms, res.LatencyP99Ms)
	fmt.Fprintf(a.stdout, "lease extensions: %.1f/s; errors: %d\n", res.ExtensionsPerSecond, res.Errors)
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return nil
}
