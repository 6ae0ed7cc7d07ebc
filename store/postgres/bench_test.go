package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/storetest"
)

func openBench(b *testing.B) (*postgres.Store, string) {
	b.Helper()
	pool := pgtest.Pool(b)
	schema := pgtest.Schema(b, pool)
	s, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, schema
}

func BenchmarkEndToEnd(b *testing.B) {
	s, _ := openBench(b)
	storetest.BenchmarkEndToEnd(b, s, "bench")
}

func BenchmarkEndToEndParallel(b *testing.B) {
	for _, workers := range []int{4, 8, 16} {
		b.Run(fmt.Sprint("workers=", workers), func(b *testing.B) {
			s, _ := openBench(b)
			storetest.BenchmarkEndToEndParallel(b, s, "bench", workers)
		})
	}
}

// BenchmarkClaim compares claims on an empty table with claims on a table
// holding 1,000,000 completed (and 10,000 dead) rows of the same queue.
func BenchmarkClaim(b *testing.B) {
	b.Run("empty", func(b *testing.B) {
		s, _ := openBench(b)
		storetest.BenchmarkClaim(b, s, "bench")
	})
	b.Run("1M-completed", func(b *testing.B) {
		s, schema := openBench(b)
		_, err := s.Pool().Exec(context.Background(), `INSERT INTO `+schema+`.messages
			(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
			SELECT 'bench', '\x00', CASE WHEN i <= 1000000 THEN 3 ELSE 4 END, 1, 5, i, now(), now(), now(), now()
			FROM generate_series(1, 1010000) AS i`)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Pool().Exec(context.Background(), `VACUUM ANALYZE `+schema+`.messages`); err != nil {
			b.Fatal(err)
		}
		storetest.BenchmarkClaim(b, s, "bench")
	})
}

// BenchmarkServerCPU measures the CPU time the database server spends on
// each step of a message's life, per message: batches of 700 enqueued,
// claimed and completed on one connection, whose backend's CPU time is
// read from /proc (so only with the server on this machine; it counts in
// ticks of 10 ms, so run a few hundred iterations). Claims cost more as
// the run goes on: they read past the index entries of the messages
// claimed since the last VACUUM.
func BenchmarkServerCPU(b *testing.B) {
	const batch = 700
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close) // after the schema's cleanup, which needs the pool
	s, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: pgtest.Schema(b, pool), PollOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var pid int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	if _, err := os.Stat(stat); err != nil {
		b.Skipf("the server's backend is not on this machine: %v", err)
	}
	msgs := make([]store.NewMessage, batch)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: "bench", Payload: make([]byte, 100)}
	}
	var ticks [3]int64 // enqueue, claim, complete
	step := func(i int, fn func() error) {
		before := backendTicks(b, stat)
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		ticks[i] += backendTicks(b, stat) - before
	}
	b.ResetTimer()
	for range b.N {
		step(0, func() error { _, err := s.Enqueue(ctx, msgs); return err })
		var ds []store.Delivery
		step(1, func() error {
			ds, err = s.Claim(ctx, store.Claim{Queue: "bench", WorkerID: "w", Max: batch, LeaseDuration: time.Minute})
			if err == nil && len(ds) != batch {
				err = fmt.Errorf("claimed %d, want %d", len(ds), batch)
			}
			return err
		})
		cs := make([]store.Completion, len(ds))
		for i, d := range ds {
			cs[i] = store.Completion{Lease: d.Lease}
		}
		step(2, func() error {
			res, err := s.Complete(ctx, cs)
			if err == nil && slices.ContainsFunc(res, func(err error) bool { return err != nil }) {
				err = fmt.Errorf("completions refused: %v", res)
			}
			return err
		})
	}
	perMessage := 1e6 / float64(backendHz) / float64(b.N*batch)
	b.ReportMetric(float64(ticks[0])*perMessage, "enqueue-server-µs/msg")
	b.ReportMetric(float64(ticks[1])*perMessage, "claim-server-µs/msg")
	b.ReportMetric(float64(ticks[2])*perMessage, "complete-server-µs/msg")
}

// backendHz is the clock ticks a second that /proc counts CPU time in
// (USER_HZ, 100 on Linux).
const backendHz = 100

// backendTicks reads the user and system CPU time of the process whose
// /proc stat file is stat, in clock ticks.
func backendTicks(b *testing.B, stat string) int64 {
	raw, err := os.ReadFile(stat)
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th.
	text := string(raw)
	fields := strings.Fields(text[strings.LastIndexByte(text, ')')+1:])
	var total int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		total += n
	}
	return total
}
