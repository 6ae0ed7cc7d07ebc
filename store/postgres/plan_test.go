package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
)

// TestPlansFollowTableGrowth runs claims and completions many times on a
// tiny table, where a sequential scan is the cheapest plan, then grows the
// table without an ANALYZE and checks that a claim and a completion no
// longer scan it. A plan cached for the tiny table would keep scanning
// every row, completed ones included.
func TestPlansFollowTableGrowth(t *testing.T) {
	ctx := context.Background()
	setup := pgtest.Pool(t)
	schema := pgtest.Schema(t, setup)
	// One connection: the store's statements and the statistics reads
	// below run on the same server process, whose counters are flushed on
	// request.
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := openLive(t, pool, schema)

	cycle := func() {
		t.Helper()
		if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Payload: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
		ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Claim = %d deliveries, %v; want 1", len(ds), err)
		}
		res, err := s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}})
		if err != nil || res[0] != nil {
			t.Fatalf("Complete = %v, %v", res, err)
		}
	}
	seqScans := func() int64 {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := pool.QueryRow(ctx, `SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages'`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A vacuumed empty table is what a drained queue leaves: the planner
	// then knows the table is empty, where a new table's size is a guess.
	if _, err := setup.Exec(ctx, `VACUUM `+schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		cycle()
	}
	if _, err := setup.Exec(ctx, `INSERT INTO `+schema+`.messages
		(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'q', '\x00', 3, 1, 5, 0, now(), now(), now(), now() FROM generate_series(1, 50000)`); err != nil {
		t.Fatal(err)
	}
	before := seqScans()
	cycle()
	if after := seqScans(); after != before {
		t.Fatalf("a claim and a completion on a table of 50,000 rows made %d sequential scans, want 0", after-before)
	}
}
