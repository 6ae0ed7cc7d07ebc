package leasehold_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// BenchmarkClientOverhead measures what the client adds per job on the
// memory store, around a handler that does nothing: everything the
// worker's overhead benchmark counts, plus decoding the args and
// dispatching by kind. Jobs are enqueued before the timer starts.
func BenchmarkClientOverhead(b *testing.B) {
	for _, conc := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			st, err := memory.New(memory.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.ReportAllocs()
			timeJobs(b, st, leasehold.QueueConfig{Concurrency: conc}, "")
		})
	}
}

// BenchmarkKeyRuns measures jobs of one key on SQLite, claimed one at a
// time and with KeyRuns, which takes them up to Concurrency (10) to a
// claim; they run one at a time either way, each completed before the
// next starts. Jobs are enqueued before the timer starts.
func BenchmarkKeyRuns(b *testing.B) {
	for _, runs := range []bool{false, true} {
		b.Run(fmt.Sprintf("key_runs=%v", runs), func(b *testing.B) {
			st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			timeJobs(b, st, leasehold.QueueConfig{Concurrency: 10, KeyRuns: runs}, "K")
		})
	}
}

// timeJobs enqueues b.N jobs on st's default queue, of key when it is
// set, stored as the client stores them (JSON args and a kind), and
// times a client of st, working the queue as qc says, until it has run
// them all with a handler that does nothing.
func timeJobs[TTx any](b *testing.B, st store.TxStore[TTx], qc leasehold.QueueConfig, key string) {
	ctx := context.Background()
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet(), Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: qc}})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]store.NewMessage, 0, 1000)
	for i := 0; i < b.N; i += len(batch) {
		batch = batch[:min(cap(batch), b.N-i)]
		for j := range batch {
			batch[j] = store.NewMessage{Queue: leasehold.DefaultQueue, Kind: "send_email", Key: key, Payload: []byte(`{"to":"ann@example.com"}`)}
		}
		if _, err := st.Enqueue(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	done := make(chan struct{})
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
		if n.Add(1) == int64(b.N) {
			close(done)
		}
		return nil
	})
	b.ResetTimer()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-done
	b.StopTimer()
	if err := c.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEnqueueMany measures EnqueueMany in batches of 1,000 jobs of
// 100-byte args without keys or dedup ids, each batch one call, on
// PostgreSQL (a schema of its own) and SQLite (a fresh file); it reports
// jobs/s.
func BenchmarkEnqueueMany(b *testing.B) {
	const batch = 1000
	params := make([]leasehold.EnqueueParams, batch)
	for i := range params {
		params[i] = leasehold.EnqueueParams{Args: benchJob{Payload: strings.Repeat("x", 100)}}
	}
	run := func(b *testing.B, st store.Store) {
		c := clientOf(b, st, leasehold.Config{})
		ctx := context.Background()
		for b.Loop() {
			if _, err := c.EnqueueMany(ctx, params); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
	}
	b.Run("postgres", func(b *testing.B) {
		pool := pgtest.Pool(b)
		st, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: pgtest.Schema(b, pool)})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		run(b, st)
	})
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		run(b, st)
	})
}

// benchJob is a job whose args are its payload.
type benchJob struct {
	Payload string `json:"payload"`
}

func (benchJob) Kind() string { return "bench" }
