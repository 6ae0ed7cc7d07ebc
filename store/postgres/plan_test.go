package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// TestRunsFollowTableGrowth does what TestPlansFollowTableGrowth does for
// a one-key queue claimed with runs, its messages given back (which reads
// the key's running messages and holds the rest of a run) and completed
// late, and claimed with independent leases, the first given back alone
// and claimed again up to the run's processing messages: none of it
// scans the table once it has grown.
func TestRunsFollowTableGrowth(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s
	cycle := func() {
		t.Helper()
		msgs := make([]store.NewMessage, 4)
		for i := range msgs {
			msgs[i] = store.NewMessage{Queue: "q", Key: "k", Payload: []byte("x")}
		}
		if _, err := s.Enqueue(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		run := func() []store.Delivery {
			t.Helper()
			ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute, Runs: true})
			if err != nil || len(ds) != 4 {
				t.Fatalf("Claim = %d deliveries, %v; want a run of 4", len(ds), err)
			}
			return ds
		}
		ds := run()
		if _, err := s.Fail(ctx, store.Failure{Lease: ds[0].Lease, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		ds = run()
		cs := make([]store.Completion, len(ds))
		for i, d := range ds {
			cs[i] = store.Completion{Lease: d.Lease, Late: true}
		}
		res, err := s.Complete(ctx, cs)
		if err != nil || slices.ContainsFunc(res, func(err error) bool { return err != nil }) {
			t.Fatalf("Complete = %v, %v", res, err)
		}
		// Independent leases: the first goes back alone, and the next
		// claim stops at the run's processing messages.
		if _, err := s.Enqueue(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		independent := store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute, Runs: true, Independent: true}
		ds, err = s.Claim(ctx, independent)
		if err != nil || len(ds) != 4 {
			t.Fatalf("Claim = %d deliveries, %v; want a run of 4", len(ds), err)
		}
		if err := s.Release(ctx, store.Release{Lease: ds[0].Lease}); err != nil {
			t.Fatal(err)
		}
		head, err := s.Claim(ctx, independent)
		if err != nil || len(head) != 1 {
			t.Fatalf("Claim = %d deliveries, %v; want the head alone", len(head), err)
		}
		cs = []store.Completion{{Lease: head[0].Lease}, {Lease: ds[1].Lease}, {Lease: ds[2].Lease}, {Lease: ds[3].Lease}}
		if res, err := s.Complete(ctx, cs); err != nil || slices.ContainsFunc(res, func(err error) bool { return err != nil }) {
			t.Fatalf("Complete = %v, %v", res, err)
		}
	}
	if _, err := f.setup.Exec(ctx, `VACUUM `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		cycle()
	}
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, key, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'q', 'k', '\x00', 3, 1, 5, 0, now(), now(), now(), now() FROM generate_series(1, 50000)`); err != nil {
		t.Fatal(err)
	}
	f.unchanged(t, seqScansQuery, "sequential scans", "runs claimed, given back and completed late on a table of 50,000 rows", func() error {
		cycle()
		return nil
	})
}

// TestEnqueueLookupsFollowTableGrowth does what TestPlansFollowTableGrowth
// does for the lookups an enqueue makes: of fairness groups, whose
// placement looks up the queue's first ready message and the group's
// last, in both statements that place them, and of unique keys.
func TestEnqueueLookupsFollowTableGrowth(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s
	n := 0
	cycle := func() {
		t.Helper()
		n++
		// One statement places the first batch; a dedup id takes the
		// second through the one-by-one insert, under locks.
		batches := [][]store.NewMessage{
			{{Queue: "q", FairGroup: "a"}, {Queue: "q", FairGroup: "b"}, {Queue: "q", FairGroup: "a"}},
			{{Queue: "q", FairGroup: "a", DedupID: fmt.Sprint(n), UniqueKey: fmt.Sprint(n)}},
		}
		for _, msgs := range batches {
			if _, err := s.Enqueue(ctx, msgs); err != nil {
				t.Fatal(err)
			}
		}
		if err := completeAll(s, claimN(t, s, 4, time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.setup.Exec(ctx, `VACUUM `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		cycle()
	}
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, fair_group, unique_key, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'q', 'a', 'old' || i, '\x00', 3, 1, 5, 0, now(), now(), now(), now() FROM generate_series(1, 50000) AS i`); err != nil {
		t.Fatal(err)
	}
	f.unchanged(t, seqScansQuery, "sequential scans", "fairness groups' and unique keys' messages enqueued on a table of 50,000 rows", func() error {
		cycle()
		return nil
	})
}

// TestRunsSurviveStaleStatistics gathers statistics while one key's
// waiting messages are the whole table, then finishes most of them and
// claims the rest of the key with runs. Read in id order through the
// primary key, as those statistics make look cheap, the key's waiting
// messages would come after every finished one.
func TestRunsSurviveStaleStatistics(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages (queue, key, payload, state, max_deliveries, enqueued_at, visible_at)
		SELECT 'q', 'k', '\x00', CASE WHEN i = 1 THEN 0 ELSE 1 END, 5, now(), now() FROM generate_series(1, 5000) AS i;
		ANALYZE `+f.schema+`.messages;
		UPDATE `+f.schema+`.messages SET state = 3, finished_at = now() WHERE id <= 4000;
		UPDATE `+f.schema+`.messages SET state = 0 WHERE id = 4001`); err != nil {
		t.Fatal(err)
	}
	before := f.counter(t, indexFetchesQuery)
	for range 10 {
		ds, err := f.s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute, Runs: true})
		if err != nil || len(ds) != 10 {
			t.Fatalf("Claim = %d deliveries, %v; want a run of 10", len(ds), err)
		}
		if _, err := f.s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.Fail(ctx, store.Failure{Lease: ds[1].Lease, Error: "back"}); err != nil {
			t.Fatal(err)
		}
	}
	if fetched := f.counter(t, indexFetchesQuery) - before; fetched > 1000 {
		t.Errorf("10 claims with runs fetched %d rows through indexes, want at most 1,000; the table holds 4,000 finished", fetched)
	}
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
	// Rows fetched by plain index scans of any index of the table.
	indexFetchesQuery = `SELECT idx_tup_fetch FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages'`
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

// TestBrowsingReadsNoHistory checks which indexes the reads a dashboard
// makes use, on a queue with 50,000 completed messages (half with keys,
// one in a thousand of a rare kind) and a few hundred live ones, statistics gathered: none scans the table, none
// reads an index of the completed rows unless it lists completed
// messages, and each reads the index meant for it. The counters are the
// server's own, so the plans checked are those the store's statements got
// with their arguments.
func TestBrowsingReadsNoHistory(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, key, kind, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'q', CASE WHEN i % 2 = 0 THEN 'k' || (i % 5000) END, CASE WHEN i % 1000 = 0 THEN 'rare' ELSE 'email' END,
			'\x00', 3, 1, 5, 0, now(), now(), now(), now()
		FROM generate_series(1, 50000) AS i;
		INSERT INTO `+f.schema+`.completed_counts (queue, shard, n) VALUES ('q', 0, 50000)`); err != nil {
		t.Fatal(err)
	}
	msgs := make([]store.NewMessage, 400)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: "q", Key: fmt.Sprint("k", i%100), Kind: "email"}
	}
	res, err := s.Enqueue(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 60, LeaseDuration: time.Hour})
	if err != nil || len(ds) != 60 {
		t.Fatalf("Claim = %d, %v", len(ds), err)
	}
	for _, d := range ds[:10] {
		if _, err := s.Fail(ctx, store.Failure{Lease: d.Lease, Permanent: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(ctx, "q", []int64{res[len(res)-1].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.setup.Exec(ctx, `ANALYZE `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx, "q")
	if err != nil || st.Completed != 50000 || st.Waiting == 0 || st.Pending == 0 || st.Processing == 0 || st.Dead == 0 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}

	live := []string{"messages_ready", "messages_waiting", "messages_processing", "messages_dead", "messages_cancelled"}
	list := func(lf store.ListFilter) func() error {
		return func() error {
			lf.Queue = "q"
			infos, err := s.List(ctx, lf)
			if err == nil && len(infos) == 0 {
				err = fmt.Errorf("List(%+v) listed nothing", lf)
			}
			return err
		}
	}
	for _, c := range []struct {
		op    string
		fn    func() error
		uses  []string // the indexes the operation may read, one at least
		needs string   // an index it must read, if any
	}{
		{"List of completed messages", list(store.ListFilter{State: store.Completed}), nil, "messages_completed_queue"},
		{"List of completed messages, a later page", list(store.ListFilter{State: store.Completed, AfterID: 25000}), nil, "messages_completed_queue"},
		{"List of completed messages, the page before", list(store.ListFilter{State: store.Completed, BeforeID: 25000}), nil, "messages_completed_queue"},
		// A common kind: the planner may walk either index.
		{"List of completed messages of a kind", list(store.ListFilter{State: store.Completed, Kind: "email"}),
			[]string{"messages_completed_queue", "messages_completed_kind"}, ""},
		{"List of completed messages of a rare kind", list(store.ListFilter{State: store.Completed, Kind: "rare"}), nil, "messages_completed_kind"},
		{"List of completed messages with a key", list(store.ListFilter{State: store.Completed, Key: "k42"}), nil, "messages_finished_key"},
		{"List of completed messages with a key, the page before", list(store.ListFilter{State: store.Completed, Key: "k42", BeforeID: 25000}), nil, "messages_finished_key"},
		{"List of pending messages", list(store.ListFilter{State: store.Pending}), nil, "messages_ready"},
		{"List of pending messages with a key", list(store.ListFilter{State: store.Pending, Key: "k70"}), nil, "messages_key_head"},
		{"List of waiting messages", list(store.ListFilter{State: store.Waiting}), nil, "messages_waiting"},
		{"List of waiting messages with a key", list(store.ListFilter{State: store.Waiting, Key: "k3"}), nil, "messages_waiting"},
		{"List of processing messages", list(store.ListFilter{State: store.Processing}), nil, "messages_processing"},
		{"List of processing messages with a key", list(store.ListFilter{State: store.Processing, Key: "k20"}), nil, "messages_key_head"},
		{"List of dead messages for a reason", list(store.ListFilter{State: store.Dead, Reason: store.ReasonPermanent}), nil, "messages_dead"},
		// Ten dead messages: their own index may be the cheaper read.
		{"List of dead messages with a key", list(store.ListFilter{State: store.Dead, Key: "k1"}), []string{"messages_dead", "messages_finished_key"}, ""},
		{"List of cancelled messages", list(store.ListFilter{State: store.Cancelled}), nil, "messages_cancelled"},
		// A kind in the live and dead states, as a job listing of a kind
		// across states asks: the state's index, the kind passed over.
		{"List of pending messages of a kind", list(store.ListFilter{State: store.Pending, Kind: "email"}), nil, "messages_ready"},
		{"List of waiting messages of a kind", list(store.ListFilter{State: store.Waiting, Kind: "email"}), nil, "messages_waiting"},
		{"List of processing messages of a kind", list(store.ListFilter{State: store.Processing, Kind: "email"}), nil, "messages_processing"},
		{"List of dead messages of a kind", list(store.ListFilter{State: store.Dead, Kind: "email"}), nil, "messages_dead"},
		{"List of cancelled messages of a kind", list(store.ListFilter{State: store.Cancelled, Kind: "email"}), nil, "messages_cancelled"},
		{"Get", func() error { _, err := s.Get(ctx, 30000); return err }, nil, "messages_pkey"},
		{"BlockedKeys", func() error {
			keys, err := s.BlockedKeys(ctx, "q", "", 0)
			if err == nil && (len(keys) == 0 || keys[0].Head.ID == 0) {
				err = fmt.Errorf("BlockedKeys = %+v, want keys with heads", keys)
			}
			return err
		}, []string{"messages_key_head"}, "messages_waiting"},
		{"Queues", func() error {
			qs, err := s.Queues(ctx)
			if err == nil && !slices.Equal(qs, []string{"q"}) {
				err = fmt.Errorf("Queues = %v, want [q]", qs)
			}
			return err
		}, live, "messages_ready"},
		{"Stats", func() error { _, err := s.Stats(ctx, "q"); return err }, live, "messages_ready"},
		{"QueuePage", func() error {
			qs, err := s.QueuePage(ctx, "", "", 50)
			if err == nil && !slices.Equal(qs, []string{"q"}) {
				err = fmt.Errorf("QueuePage = %v, want [q]", qs)
			}
			return err
		}, live, "messages_ready"},
		{"QueuePage before a name", func() error {
			qs, err := s.QueuePage(ctx, "", "r", 50)
			if err == nil && !slices.Equal(qs, []string{"q"}) {
				err = fmt.Errorf("QueuePage = %v, want [q]", qs)
			}
			return err
		}, live, "messages_ready"},
		{"AllStats", func() error {
			all, err := s.AllStats(ctx)
			if err == nil && len(all) == 1 {
				// The database's clock moves between the two reads.
				all[0].OldestPendingAge = st.OldestPendingAge
			}
			if err == nil && (len(all) != 1 || all[0] != st) {
				err = fmt.Errorf("AllStats = %+v, want [%+v]", all, st)
			}
			return err
		}, live, "messages_ready"},
	} {
		f.readsOnly(t, c.op, c.fn, c.uses, c.needs)
	}
}

// readsOnly runs op's fn and fails the test if it scanned the messages
// table, read an index other than uses and needs (but for a probe of the
// primary key's end), read none of them, or did not read needs when it
// is set.
func (f planFixture) readsOnly(t *testing.T, op string, fn func() error, uses []string, needs string) {
	t.Helper()
	before := f.indexReads(t)
	f.unchanged(t, seqScansQuery, "sequential scans", op, fn)
	after := f.indexReads(t)
	uses = append(slices.Clone(uses), needs)
	read := false
	for index, n := range after {
		scans, tuples := n.scans-before[index].scans, n.tuples-before[index].tuples
		switch {
		case scans == 0:
		case slices.Contains(uses, index):
			read = true
		case index == "messages_pkey" && tuples <= 4:
			// The planner reads an end of the primary key to estimate
			// a range of ids: a probe of a tuple or two, not a walk.
		default:
			t.Errorf("%s read %s (%d scans, %d tuples), want only %v", op, index, scans, tuples, uses)
		}
	}
	if needs != "" && after[needs].scans == before[needs].scans {
		t.Errorf("%s did not read %s", op, needs)
	}
	if !read {
		t.Errorf("%s read none of %v", op, uses)
	}
}

// TestRerunAndDeleteReadByID checks that Rerun and Delete find their
// messages through the primary key (a delayed one maybe through
// messages_ready), and a rerun message's key's head through
// messages_key_head, beside 50,000 completed messages of the
// same keys, statistics gathered: what they cost does not grow with the
// history.
func TestRerunAndDeleteReadByID(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, key, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'q', 'k' || (i % 100), '\x00', 3, 1, 5, 0, now(), now(), now(), now() FROM generate_series(1, 50000) AS i;
		INSERT INTO `+f.schema+`.completed_counts (queue, shard, n) VALUES ('q', 0, 50000)`); err != nil {
		t.Fatal(err)
	}
	res, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Key: "k1", Delay: time.Hour}, {Queue: "q", Key: "k2"}, {Queue: "q", Key: "k2"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.setup.Exec(ctx, `ANALYZE `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	f.readsOnly(t, "Rerun of completed messages", func() error { return s.Rerun(ctx, []int64{42, 43, 44}) },
		[]string{"messages_key_head"}, "messages_pkey")
	f.readsOnly(t, "Rerun of a delayed pending message", func() error { return s.Rerun(ctx, []int64{res[0].ID}) },
		[]string{"messages_ready"}, "messages_pkey")
	f.readsOnly(t, "Delete of completed messages", func() error { return s.Delete(ctx, []int64{100, 200}) }, nil, "messages_pkey")
	f.readsOnly(t, "Delete of a key's head", func() error { return s.Delete(ctx, []int64{res[1].ID}) },
		[]string{"messages_key_head", "messages_waiting"}, "messages_pkey")
	st, err := s.Stats(ctx, "q")
	if err != nil || st.Completed != 50000-5 || st.Pending != 5 {
		t.Fatalf("Stats = %+v, %v; want 49,995 completed and 5 pending", st, err)
	}
}

// indexReads reads how many scans each index of the schema's messages
// table has had, and how many entries they read.
func (f planFixture) indexReads(t *testing.T) map[string]indexRead {
	t.Helper()
	ctx := context.Background()
	if _, err := f.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(ctx, `SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes
		WHERE schemaname = $1 AND relname = 'messages'`, f.schema)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]indexRead{}
	var name string
	var r indexRead
	if _, err := pgx.ForEachRow(rows, []any{&name, &r.scans, &r.tuples}, func() error {
		out[name] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

type indexRead struct{ scans, tuples int64 }

// TestMovesReadTheirIndexes checks that Move reads the index of the
// state it moves, a page's worth of it, on a dead-letter queue of 20,000
// pending and 20,000 dead messages beside 50,000 completed ones,
// statistics gathered: pending ones through messages_ready in claim
// order, dead ones through messages_dead, then each moved row through
// the primary key (and the records of the queues they go to through
// theirs), and never the table whole.
func TestMovesReadTheirIndexes(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s
	for _, q := range []string{"src", "other"} {
		if _, _, err := s.CreateQueue(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'dlq', '\x00', 3, 1, 5, 0, now(), now(), now(), now() FROM generate_series(1, 50000);
		INSERT INTO `+f.schema+`.messages (queue, key, payload, state, max_deliveries, enqueued_at, visible_at, finished_at, dead_letter_source)
		SELECT 'dlq', CASE WHEN i % 2 = 0 THEN 'k' || i END, '\x00', CASE WHEN i % 2 = 0 THEN 0 ELSE 4 END, 5,
			now() - interval '1 hour', now() - interval '1 hour', CASE WHEN i % 2 = 1 THEN now() END, 'src'
		FROM generate_series(1, 40000) AS i;
		ANALYZE `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op    string
		m     store.Move
		index string
	}{
		{"Move of pending messages back to their source", store.Move{Queue: "dlq", State: store.Pending, Limit: 100}, "messages_ready"},
		{"Move of pending messages to a queue", store.Move{Queue: "dlq", State: store.Pending, To: "other", Limit: 100}, "messages_ready"},
		{"Move of dead messages", store.Move{Queue: "dlq", State: store.Dead, To: "other", Limit: 100}, "messages_dead"},
	} {
		before := f.indexReads(t)
		f.unchanged(t, seqScansQuery, "sequential scans", c.op, func() error {
			n, err := s.Move(ctx, c.m)
			if err == nil && n != 100 {
				err = fmt.Errorf("moved %d, want 100", n)
			}
			return err
		})
		after := f.indexReads(t)
		for index, n := range after {
			scans, tuples := n.scans-before[index].scans, n.tuples-before[index].tuples
			switch {
			case scans == 0:
			case index == c.index || index == "messages_pkey" || index == "messages_key_head" || index == "messages_waiting" || index == "queues_pkey":
				// The page, each moved row, each moved key's head in its
				// new queue and the next of a moved head's line: in
				// proportion to the page.
				if tuples > 1000 {
					t.Errorf("%s read %d entries of %s, want about a page's", c.op, tuples, index)
				}
			default:
				t.Errorf("%s read %s (%d scans, %d tuples), want only %s, the primary key and the keys' indexes", c.op, index, scans, tuples, c.index)
			}
		}
		if after[c.index].scans == before[c.index].scans {
			t.Errorf("%s did not read %s", c.op, c.index)
		}
	}
}

// TestWaitingLineReadsInOrder checks that a key's waiting messages are
// read from messages_waiting in their line's order, a few entries for a
// claim with runs or the promotion of the next, however many wait: on a
// key with 20,000 waiting messages, one of them moved in (whose line
// order is not its id's), statistics gathered. A sort would read them
// all.
func TestWaitingLineReadsInOrder(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s
	if _, _, err := s.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	moved, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "src", Key: "k", Payload: []byte("moved")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Key: "k", Payload: []byte("head")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages (queue, key, payload, state, max_deliveries, enqueued_at, visible_at)
		SELECT 'q', 'k', '\x00', 1, 5, now(), now() FROM generate_series(1, 20000)`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Move(ctx, store.Move{Queue: "src", State: store.Pending, To: "q", Limit: 1}); err != nil || n != 1 {
		t.Fatalf("Move = %d, %v; want 1", n, err)
	}
	if _, err := f.setup.Exec(ctx, `ANALYZE `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op string
		fn func() error
	}{
		{"a claim with runs", func() error {
			ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute, Runs: true})
			if err == nil && len(ds) != 10 {
				err = fmt.Errorf("claimed %d, want a run of 10", len(ds))
			}
			if err == nil && slices.ContainsFunc(ds, func(d store.Delivery) bool { return d.MessageID == moved[0].ID }) {
				err = fmt.Errorf("the run took the moved message ahead of those that waited before it")
			}
			if err == nil {
				_, err = s.Fail(ctx, store.Failure{Lease: ds[0].Lease, Error: "boom"})
			}
			return err
		}},
	} {
		before := f.indexReads(t)
		if err := c.fn(); err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		after := f.indexReads(t)
		if got := after["messages_waiting"].tuples - before["messages_waiting"].tuples; got > 100 || after["messages_waiting"].scans == before["messages_waiting"].scans {
			t.Errorf("%s read %d entries of messages_waiting in %d scans, want a run's worth", c.op, got, after["messages_waiting"].scans-before["messages_waiting"].scans)
		}
	}
	// The head, pending again, completes; its promotion reads the next.
	ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Claim = %d, %v", len(ds), err)
	}
	before := f.indexReads(t)
	if res, err := s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil || res[0] != nil {
		t.Fatalf("Complete = %v, %v", res, err)
	}
	after := f.indexReads(t)
	if got := after["messages_waiting"].tuples - before["messages_waiting"].tuples; got > 100 {
		t.Errorf("a promotion read %d entries of messages_waiting, want a few", got)
	}
}

// TestScheduledReadsItsRanges checks that a page of delayed messages,
// on a queue with 50,000 completed messages and 20,000 pending ones
// visible already, in three priorities, statistics gathered, reads
// messages_ready alone, and only the delayed range of each priority
// (and a probe per priority): what it costs does not grow with the
// ready backlog or the history.
func TestScheduledReadsItsRanges(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	s := f.s
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.messages
		(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'q', '\x00', 3, 1, 5, 0, now(), now(), now(), now() FROM generate_series(1, 50000);
		INSERT INTO `+f.schema+`.messages (queue, payload, state, max_deliveries, priority, enqueued_at, visible_at)
		SELECT 'q', '\x00', 0, 5, i % 3, now() - interval '1 hour', now() - interval '1 hour' FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	msgs := make([]store.NewMessage, 30)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: "q", Payload: []byte("later"), Priority: i % 3, Delay: time.Duration(i+1) * time.Minute}
	}
	res, err := s.Enqueue(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.setup.Exec(ctx, `ANALYZE `+f.schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	before := f.indexReads(t)
	f.readsOnly(t, "Scheduled", func() error {
		infos, err := s.Scheduled(ctx, "q", store.ScheduledAfter{}, 10)
		if err == nil && (len(infos) != 10 || infos[0].ID != res[0].ID || infos[9].ID != res[9].ID) {
			err = fmt.Errorf("Scheduled listed %d messages, the first %d; want the first 10 enqueued", len(infos), infos[0].ID)
		}
		return err
	}, nil, "messages_ready")
	if read := f.indexReads(t)["messages_ready"].tuples - before["messages_ready"].tuples; read > 100 {
		t.Errorf("Scheduled read %d entries of messages_ready for a page of 10, want the delayed ones and a probe per priority", read)
	}
	f.readsOnly(t, "Scheduled, a later page", func() error {
		infos, err := s.Scheduled(ctx, "q", store.ScheduledAfter{VisibleAt: time.Now().Add(20 * time.Minute), ID: res[19].ID}, 10)
		if err == nil && len(infos) == 0 {
			err = fmt.Errorf("Scheduled listed nothing after the 20th")
		}
		return err
	}, nil, "messages_ready")
}

// TestThroughputReadsItsKey checks that a queue's minutes are read
// through the throughput table's primary key, among a day of minutes of
// a hundred queues, statistics gathered.
func TestThroughputReadsItsKey(t *testing.T) {
	ctx := context.Background()
	f := newPlanFixture(t)
	if _, err := f.setup.Exec(ctx, `INSERT INTO `+f.schema+`.throughput (queue, minute, shard, completed, failed, dead)
		SELECT 'q' || (i % 100), date_trunc('minute', now()) - (i / 100) * interval '1 minute', 0, 1, 0, 0
		FROM generate_series(0, 143999) AS i;
		ANALYZE `+f.schema+`.throughput`); err != nil {
		t.Fatal(err)
	}
	scans := `SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'throughput'`
	keyReads := `SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = 'throughput_pkey'`
	before := f.counter(t, keyReads)
	f.unchanged(t, scans, "sequential scans of throughput", "Throughput", func() error {
		ms, err := f.s.Throughput(ctx, "q7", time.Now().Add(-time.Hour))
		if err == nil && (len(ms) < 60 || len(ms) > 61) {
			err = fmt.Errorf("Throughput listed %d minutes of the last hour", len(ms))
		}
		return err
	})
	if f.counter(t, keyReads) == before {
		t.Errorf("Throughput did not read throughput_pkey")
	}
}
