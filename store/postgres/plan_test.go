package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
)

// TestPlansFollowTableGrowth runs claims and completions many times on a
// tiny table, where a sequential scan is the cheapest plan, then grows the
// table without an ANALYZE and checks that a claim and a completion no
// longer scan it. A plan cached for the tiny table would keep scanning
// every row, completed ones included.
func TestPlansFollowTableGrowth(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s

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

	// A vacuumed empty table is what a drained queue leaves: the planner
	// then knows the table is empty, where a new table's size is a guess.
	if _, err := f.setup.Exec(ctx, `VACUUM `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		cycle()
	}
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'q', '\x00', 3, 1, 5, 0, now(), now(), now(), now() FROM generate_series(1, 50000)`); err != nil {
		t.Fatal(err)
	}
	f.unchanged(t, seqScansQuery, "sequential scans", "a claim and a completion on a table of 50,000 rows", func() error {
		cycle()
		return nil
	})
}

// TestLeaseChecksUseThePrimaryKey checks that statements naming leases find
// their rows through the primary key, never through messages_processing:
// that index keeps an entry for every lease taken since the last VACUUM, so
// scanning its unexpired range would cost in proportion to recent history.
func TestLeaseChecksUseThePrimaryKey(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s

	// History: 20,000 messages that were leased and completed.
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until)
		SELECT 'old', '\x00', 2, 1, 5, 0, now(), now(), now() + interval '1 hour' FROM generate_series(1, 20000);
		UPDATE `+f.schema+`.messages SET state = 3, finished_at = now()`); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, s, 1000)
	leases := claimN(t, s, 1000, time.Hour)

	check := func(op string, fn func() error) {
		t.Helper()
		f.unchanged(t, processingScansQuery, "scans of messages_processing", op, fn)
	}
	check("Extend", func() error { return extendAll(s, leases) })
	check("Fail", func() error {
		_, err := s.Fail(ctx, store.Failure{Lease: leases[0], Error: "boom"})
		return err
	})
	check("Release", func() error { return s.Release(ctx, store.Release{Lease: leases[1]}) })
	check("Complete", func() error { return completeAll(s, leases[2:]) })
}

// TestReapTakesBackEveryExpiredLease checks that one Reap takes back
// thousands of expired leases.
func TestReapTakesBackEveryExpiredLease(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	clk := clocktest.New()
	s, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const n = 2500
	enqueueN(t, s, n)
	claimN(t, s, n, time.Minute)
	clk.Advance(2 * time.Minute)
	got, err := s.Reap(ctx)
	if err != nil || len(got) != n {
		t.Fatalf("Reap = %d recovered, %v; want %d", len(got), err, n)
	}
	st, err := s.Stats(ctx, "q")
	if err != nil || st.Pending != n {
		t.Fatalf("Stats = %+v, %v; want %d pending", st, err, n)
	}
}

// TestReapReadsItsIndexInOrder checks that the reaper reads
// messages_processing with an ordered index scan, the kind that marks the
// entries of ended leases dead as it passes them, even where the
// statistics favour another plan: here every row of the table is an
// expired lease. A bitmap scan fetches no row through the index's own
// counter; a sequential scan reads the whole table.
func TestReapReadsItsIndexInOrder(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	const n = 5000
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until)
		SELECT 'q', '\x00', 2, 1, 5, 0, now(), now(), now() - interval '1 hour' FROM generate_series(1, `+fmt.Sprint(n)+`);
		ANALYZE `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	before := f.counter(t, processingFetchesQuery)
	f.unchanged(t, seqScansQuery, "scans of the whole table", "Reap", func() error {
		got, err := f.s.Reap(ctx)
		if err == nil && len(got) != n {
			err = fmt.Errorf("recovered %d, want %d", len(got), n)
		}
		return err
	})
	if fetched := f.counter(t, processingFetchesQuery) - before; fetched < n {
		t.Errorf("Reap fetched %d rows through messages_processing in order, want %d", fetched, n)
	}
}

// TestPlansSurviveStaleStatistics gathers statistics at a bad moment, with
// a backlog of pending messages and every lease expiry in the past, then
// claims, extends and completes a batch. Planned as joins of the batch
// with the table, these statements turn into scans of the whole table once
// the statistics say so; they must not scan it.
func TestPlansSurviveStaleStatistics(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s

	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'q', '\x00', 3, 1, 5, 0, now(), now(), now() - interval '1 hour', now() FROM generate_series(1, 20000);
		INSERT INTO `+f.schema+`.messages (queue, payload, state, max_deliveries, enqueued_at, visible_at)
		SELECT 'q', '\x00', 0, 5, now() - interval '1 hour', now() - interval '1 hour' FROM generate_series(1, 20000);
		ANALYZE `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	check := func(op string, fn func() error) {
		t.Helper()
		f.unchanged(t, seqScansQuery, "scans of the whole table", op, fn)
	}
	var leases []store.Lease
	check("Claim", func() error {
		leases = claimN(t, s, 1000, time.Hour)
		return nil
	})
	check("Extend", func() error { return extendAll(s, leases) })
	check("Complete", func() error { return completeAll(s, leases) })
}

// planFixture is a store on a pool of one connection, so that its
// statements and the statistics reads of counter run on the same server
// process, whose counters are flushed on request; setup is a second pool
// for preparing the table.
type planFixture struct {
	setup, pool *pgxpool.Pool
	schema      string
	s           *postgres.Store
}

func newPlanFixture(t *testing.T) planFixture {
	t.Helper()
	setup := pgtest.Pool(t)
	schema := pgtest.Schema(t, setup)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return planFixture{setup: setup, pool: pool, schema: schema, s: openLive(t, pool, schema)}
}

// counter reads one statistics counter of the schema's tables or indexes,
// as a query whose $1 is the schema.
func (f planFixture) counter(t *testing.T, query string) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := f.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := f.pool.QueryRow(ctx, query, f.schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const (
	seqScansQuery        = `SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages'`
	processingScansQuery = `SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = 'messages_processing'`
	// Rows fetched by plain index scans of messages_processing; bitmap
	// scans are not counted here.
	processingFetchesQuery = `SELECT idx_tup_fetch FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = 'messages_processing'`
)

// unchanged runs op and fails the test if it changed the counter.
func (f planFixture) unchanged(t *testing.T, query, what, op string, fn func() error) {
	t.Helper()
	before := f.counter(t, query)
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if after := f.counter(t, query); after != before {
		t.Errorf("%s made %d %s, want 0", op, after-before, what)
	}
}

// completeAll completes leases in one call and returns the first error.
func completeAll(s *postgres.Store, leases []store.Lease) error {
	cs := make([]store.Completion, len(leases))
	for i, l := range leases {
		cs[i] = store.Completion{Lease: l}
	}
	res, err := s.Complete(context.Background(), cs)
	for _, e := range res {
		if e != nil && err == nil {
			err = e
		}
	}
	return err
}

// extendAll extends leases and reports any that were lost.
func extendAll(s *postgres.Store, leases []store.Lease) error {
	ext, err := s.Extend(context.Background(), leases, time.Hour)
	if err == nil && len(ext.Lost) != 0 {
		err = fmt.Errorf("lost %d leases", len(ext.Lost))
	}
	return err
}

// enqueueN enqueues n messages on queue "q".
func enqueueN(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	msgs := make([]store.NewMessage, n)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: "q", Payload: []byte("x")}
	}
	if _, err := s.Enqueue(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
}

// claimN claims exactly n messages of queue "q" and returns their leases.
func claimN(t *testing.T, s *postgres.Store, n int, lease time.Duration) []store.Lease {
	t.Helper()
	ds, err := s.Claim(context.Background(), store.Claim{Queue: "q", WorkerID: "w", Max: n, LeaseDuration: lease})
	if err != nil || len(ds) != n {
		t.Fatalf("Claim = %d deliveries, %v; want %d", len(ds), err, n)
	}
	leases := make([]store.Lease, n)
	for i, d := range ds {
		leases[i] = d.Lease
	}
	return leases
}
