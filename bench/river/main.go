// Command river measures River's throughput and enqueue-to-start latency on
// PostgreSQL the way `leasehold bench` measures leasehold in continuous mode,
// so the two can be compared side by side. See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/clock"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

const (
	defaultDSN = "postgres://postgres@127.0.0.1:5432/river_bench?sslmode=disable"
	queueName  = river.QueueDefault
	batchSize  = 1000
	// topUpEvery is how often the producer checks the backlog, as in
	// leasehold bench.
	topUpEvery = 20 * time.Millisecond
	// River's own benchmark (its command's "bench") fetches with these,
	// chosen there for throughput; River's defaults are 100 ms and 1 s.
	riverBenchFetchCooldown     = 2 * time.Millisecond
	riverBenchFetchPollInterval = 20 * time.Millisecond
)

type flags struct {
	dsn         string
	duration    time.Duration
	workers     int
	concurrency int
	payload     int
	asJSON      bool
	// fetchCooldown and fetchPollInterval are River's fetch settings.
	fetchCooldown     time.Duration
	fetchPollInterval time.Duration
	// insert, when positive, measures inserts alone instead: this many
	// jobs in batches of batchSize, with insertAPI.
	insert    int
	insertAPI string
}

// result has the shape of `leasehold bench --json`.
type result struct {
	DB                string  `json:"db"`
	Mode              string  `json:"mode"`
	Workers           int     `json:"workers"`
	Concurrency       int     `json:"concurrency"`
	Messages          int64   `json:"messages"`
	Seconds           float64 `json:"seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	LatencyP50Ms      float64 `json:"latency_p50_ms"`
	LatencyP95Ms      float64 `json:"latency_p95_ms"`
	LatencyP99Ms      float64 `json:"latency_p99_ms"`
	Errors            int64   `json:"errors"`
}

func main() {
	var f flags
	fs := flag.NewFlagSet("river", flag.ContinueOnError)
	fs.StringVar(&f.dsn, "db", defaultDSN, "PostgreSQL URL of River's database (created if missing)")
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "how long to run")
	fs.IntVar(&f.workers, "workers", 1, "River clients in this process, each a client of its own")
	fs.IntVar(&f.concurrency, "concurrency", 2000, "River MaxWorkers of the one queue, per client")
	fs.DurationVar(&f.fetchCooldown, "fetch-cooldown", riverBenchFetchCooldown, "River's FetchCooldown")
	fs.DurationVar(&f.fetchPollInterval, "fetch-poll-interval", riverBenchFetchPollInterval, "River's FetchPollInterval")
	fs.IntVar(&f.payload, "payload", 100, "payload size in bytes (a string of that many 'x' in the job args)")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object")
	fs.IntVar(&f.insert, "insert", 0, "measure inserts alone: insert this many jobs in batches of 1000 and report jobs/s")
	fs.StringVar(&f.insertAPI, "insert-api", "fast", "with --insert: fast (InsertManyFast, COPY, no rows back) or many (InsertMany, rows back)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "river: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		os.Exit(2)
	}
	switch {
	case f.duration <= 0:
		fmt.Fprintf(os.Stderr, "river: --duration %s: must be positive\n", f.duration)
		os.Exit(2)
	case f.workers < 1 || f.workers > 1000:
		fmt.Fprintf(os.Stderr, "river: --workers %d: must be 1 to 1000\n", f.workers)
		os.Exit(2)
	case f.fetchCooldown < river.FetchCooldownMin:
		fmt.Fprintf(os.Stderr, "river: --fetch-cooldown %s: must be at least %s\n", f.fetchCooldown, river.FetchCooldownMin)
		os.Exit(2)
	case f.fetchPollInterval < f.fetchCooldown:
		fmt.Fprintf(os.Stderr, "river: --fetch-poll-interval %s: must not be shorter than --fetch-cooldown\n", f.fetchPollInterval)
		os.Exit(2)
	case f.concurrency < 1 || f.concurrency > river.QueueNumWorkersMax:
		fmt.Fprintf(os.Stderr, "river: --concurrency %d: must be 1 to %d\n", f.concurrency, river.QueueNumWorkersMax)
		os.Exit(2)
	case f.payload < 0:
		fmt.Fprintf(os.Stderr, "river: --payload %d: must not be negative\n", f.payload)
		os.Exit(2)
	case f.insert < 0:
		fmt.Fprintf(os.Stderr, "river: --insert %d: must not be negative\n", f.insert)
		os.Exit(2)
	case f.insertAPI != "fast" && f.insertAPI != "many":
		fmt.Fprintf(os.Stderr, "river: --insert-api %q: must be fast or many\n", f.insertAPI)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	measure := run
	if f.insert > 0 {
		measure = runInsert
	}
	if err := measure(ctx, f, clock.System(), os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "river: %v\n", err)
		os.Exit(1)
	}
}

// benchArgs are the job args: a payload string of --payload bytes.
type benchArgs struct {
	Payload string `json:"payload"`
}

func (benchArgs) Kind() string { return "bench" }

// benchWorker records enqueue-to-start latency and does nothing else.
type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	clk  clock.Clock
	lat  *latencies
	done *atomic.Int64
	// lowWater wakes the producer (low) when the backlog, enqueued less
	// done, falls below it, as leasehold bench's handler does.
	enqueued *atomic.Int64
	lowWater int64
	low      chan<- struct{}
}

func (w *benchWorker) Work(_ context.Context, job *river.Job[benchArgs]) error {
	w.lat.add(w.clk.Now().Sub(job.CreatedAt))
	if n := w.done.Add(1); w.enqueued.Load()-n < w.lowWater {
		select {
		case w.low <- struct{}{}:
		default:
		}
	}
	return nil
}

// countErrors counts job errors and panics (there should be none).
type countErrors struct{ n *atomic.Int64 }

func (c countErrors) HandleError(context.Context, *rivertype.JobRow, error) *river.ErrorHandlerResult {
	c.n.Add(1)
	return nil
}

func (c countErrors) HandlePanic(context.Context, *rivertype.JobRow, any, string) *river.ErrorHandlerResult {
	c.n.Add(1)
	return nil
}

// latencies collects enqueue-to-start latencies, as leasehold bench does.
type latencies struct {
	mu sync.Mutex
	us []int64
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.us = append(l.us, d.Microseconds())
	l.mu.Unlock()
}

func (l *latencies) quantiles() (p50, p95, p99 float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.us) == 0 {
		return 0, 0, 0
	}
	slices.Sort(l.us)
	q := func(p float64) float64 { return float64(l.us[min(len(l.us)-1, int(p*float64(len(l.us))))]) / 1000 }
	return q(0.50), q(0.95), q(0.99)
}

// riverVersion is the version of River this binary was built with.
func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/riverqueue/river" {
				if m.Replace != nil {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "unknown"
}

// redact drops the password from a postgres:// URL; a keyword/value DSN
// is shown as "postgres database".
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "postgres database"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	return u.String()
}

// ensureDatabase creates the database named in dsn if it does not exist,
// connecting to the postgres database of the same server to do it.
func ensureDatabase(ctx context.Context, dsn string) error {
	// The pool's parameters (pool_max_conns) are pgxpool's, not the
	// server's: parsed as the pool parses them.
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("--db: %w", err)
	}
	cfg := pc.ConnConfig
	name := cfg.Database
	if name == "" || name == "postgres" {
		return nil
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to the postgres database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// prepare creates River's database if it is missing, migrates it and
// empties river_job, and returns a pool on it (closed by the caller) and
// River's driver and logger.
func prepare(ctx context.Context, f flags) (*pgxpool.Pool, *riverpgxv5.Driver, *slog.Logger, error) {
	if err := ensureDatabase(ctx, f.dsn); err != nil {
		return nil, nil, nil, err
	}
	pool, err := pgxpool.New(ctx, f.dsn)
	if err != nil {
		return nil, nil, nil, err
	}
	driver := riverpgxv5.New(pool)
	// River logs to stdout by default; keep stdout for the result.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger})
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		pool.Close()
		return nil, nil, nil, fmt.Errorf("river migrations: %w", err)
	}
	// Leftover jobs from earlier runs would make runs incomparable; River's
	// own benchmark empties and compacts the table the same way.
	for _, sql := range []string{"TRUNCATE river_job", "VACUUM FULL river_job"} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			pool.Close()
			return nil, nil, nil, err
		}
	}
	return pool, driver, logger, nil
}

// run measures River on clk, the time that latencies and the duration are
// read on.
func run(ctx context.Context, f flags, clk clock.Clock, stdout io.Writer) error {
	version := riverVersion()
	pool, driver, logger, err := prepare(ctx, f)
	if err != nil {
		return err
	}
	defer pool.Close()

	lat := &latencies{}
	var done, enqueued, failures atomic.Int64
	// target is the backlog the producer keeps; low wakes it when the
	// backlog falls below half of that, as in leasehold bench.
	target := int64(max(2*f.workers*f.concurrency, 1000))
	low := make(chan struct{}, 1)
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &benchWorker{clk: clk, lat: lat, done: &done, enqueued: &enqueued, lowWater: target / 2, low: low}); err != nil {
		return err
	}
	// Each worker is a River client of its own, as separate processes
	// would be; they share the pool, as leasehold bench's share its store.
	clients := make([]*river.Client[pgx.Tx], f.workers)
	for i := range clients {
		clients[i], err = river.NewClient(driver, &river.Config{
			FetchCooldown:     f.fetchCooldown,
			FetchPollInterval: f.fetchPollInterval,
			Queues:            map[string]river.QueueConfig{queueName: {MaxWorkers: f.concurrency}},
			Workers:           workers,
			ErrorHandler:      countErrors{&failures},
			Logger:            logger,
		})
		if err != nil {
			return err
		}
	}

	params := batchParams(f.payload)

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	began := clk.Monotonic()
	for _, c := range clients {
		if err := c.Start(runCtx); err != nil {
			return err
		}
	}
	prodCtx, stopProducer := context.WithCancel(runCtx)
	defer stopProducer()
	var prod sync.WaitGroup
	prod.Go(func() {
		produce(prodCtx, clk, clients[0], logger, target, params, low, func() int64 { return enqueued.Load() - done.Load() }, &enqueued, &failures)
	})

	tty := isTerminal(stdout) && !f.asJSON
	tick := clk.NewTicker(time.Second)
	end := clk.NewTimer(f.duration)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-end.C():
			break loop
		case <-tick.C():
			if tty {
				el := (clk.Monotonic() - began).Seconds()
				fmt.Fprintf(stdout, "\r%6.1fs  %d messages  %.0f/s  errors %d   ", el, done.Load(), float64(done.Load())/el, failures.Load())
			}
		}
	}
	tick.Stop()
	end.Stop()
	elapsed := clk.Monotonic() - began
	completed := done.Load()
	stopProducer()
	prod.Wait()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	for _, c := range clients {
		if err := c.Stop(stopCtx); err != nil {
			failures.Add(1)
			logger.Error("river client stop", "error", err)
		}
	}
	cancel()
	stopRun()
	if tty {
		fmt.Fprintln(stdout)
	}

	p50, p95, p99 := lat.quantiles()
	res := result{DB: "river:" + redact(f.dsn), Mode: "continuous", Workers: f.workers, Concurrency: f.concurrency,
		Messages: completed, Seconds: elapsed.Seconds(), MessagesPerSecond: float64(completed) / elapsed.Seconds(),
		LatencyP50Ms: p50, LatencyP95Ms: p95, LatencyP99Ms: p99, Errors: failures.Load()}
	if f.asJSON {
		// The JSON object keeps leasehold bench's shape; the version goes
		// to stderr.
		fmt.Fprintf(os.Stderr, "river %s\n", version)
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "river %s\n", version)
		fmt.Fprintf(stdout, "%s, %s, %d workers x %d: %d messages in %.2fs: %.0f messages/s\n", res.DB, res.Mode, res.Workers, res.Concurrency,
			res.Messages, res.Seconds, res.MessagesPerSecond)
		fmt.Fprintf(stdout, "enqueue-to-start latency: p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", p50, p95, p99)
		fmt.Fprintf(stdout, "errors: %d\n", res.Errors)
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return nil
}

// produce keeps the queue topped up until ctx ends, with leasehold bench's
// rule: whenever the backlog (enqueued, not done) is below target, checked
// every 20 ms and whenever a worker signals low, enqueue the difference in
// batches of up to 1000.
func produce(ctx context.Context, clk clock.Clock, client *river.Client[pgx.Tx], log *slog.Logger, target int64, params []river.InsertManyParams,
	low <-chan struct{}, backlog func() int64, enqueued, failures *atomic.Int64) {
	t := clk.NewTicker(topUpEvery)
	defer t.Stop()
	for {
		if b := backlog(); b < target {
			for n := target - b; n > 0 && ctx.Err() == nil; n -= batchSize {
				k := int(min(n, batchSize))
				// Counted before the insert, as leasehold bench does, so
				// a job cannot be done before it is counted as enqueued.
				enqueued.Add(int64(k))
				if _, err := client.InsertMany(ctx, params[:k]); err != nil && ctx.Err() == nil {
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

// isTerminal reports whether w is a character device (for the progress line).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// batchParams returns a batch of batchSize jobs whose args carry payload
// bytes.
func batchParams(payload int) []river.InsertManyParams {
	args := benchArgs{Payload: strings.Repeat("x", payload)}
	params := make([]river.InsertManyParams, batchSize)
	for i := range params {
		params[i] = river.InsertManyParams{Args: args}
	}
	return params
}

// insertResult is what --insert reports.
type insertResult struct {
	DB            string  `json:"db"`
	Mode          string  `json:"mode"`
	API           string  `json:"api"`
	Batch         int     `json:"batch"`
	Jobs          int     `json:"jobs"`
	Seconds       float64 `json:"seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
}

// runInsert measures inserts alone: --insert jobs of --payload bytes in
// batches of batchSize, one call each, from an insert-only client (no
// queues worked), timed on clk from the first call to the last return.
func runInsert(ctx context.Context, f flags, clk clock.Clock, stdout io.Writer) error {
	version := riverVersion()
	pool, driver, logger, err := prepare(ctx, f)
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := river.NewClient(driver, &river.Config{Logger: logger})
	if err != nil {
		return err
	}
	params := batchParams(f.payload)
	api := "InsertManyFast"
	insert := func(p []river.InsertManyParams) (int, error) { return client.InsertManyFast(ctx, p) }
	if f.insertAPI == "many" {
		api = "InsertMany"
		insert = func(p []river.InsertManyParams) (int, error) {
			res, err := client.InsertMany(ctx, p)
			return len(res), err
		}
	}
	began := clk.Monotonic()
	for left := f.insert; left > 0; left -= batchSize {
		p := params[:min(left, batchSize)]
		n, err := insert(p)
		if err != nil {
			return fmt.Errorf("%s: %w", api, err)
		}
		if n != len(p) {
			return fmt.Errorf("%s inserted %d jobs of %d", api, n, len(p))
		}
	}
	elapsed := (clk.Monotonic() - began).Seconds()
	var stored int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&stored); err != nil {
		return err
	}
	if stored != f.insert {
		return fmt.Errorf("river_job holds %d jobs after inserting %d", stored, f.insert)
	}
	res := insertResult{DB: "river:" + redact(f.dsn), Mode: "insert", API: api, Batch: batchSize, Jobs: f.insert, Seconds: elapsed,
		JobsPerSecond: float64(f.insert) / elapsed}
	if f.asJSON {
		fmt.Fprintf(os.Stderr, "river %s\n", version)
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "river %s\n%s, %s in batches of %d: %d jobs in %.2fs: %.0f jobs/s\n", version, res.DB, api, batchSize, res.Jobs, res.Seconds, res.JobsPerSecond)
	return nil
}
