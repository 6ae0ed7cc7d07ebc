package postgres_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/storetest"
)

func TestConformance(t *testing.T) {
	pool := pgtest.Pool(t)
	storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store {
		s, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, storetest.ClaimsSkipLocked())
}

func TestSchemaChecks(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	for _, bad := range []string{"", "Robert'); DROP TABLE x;--", "1abc", "a-b"} {
		if err := postgres.Migrate(ctx, pool, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Migrate(%q) = %v, want ErrInvalid", bad, err)
		}
		if bad == "" {
			continue // an empty schema means DefaultSchema
		}
		if _, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: bad}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	schema := pgtest.Schema(t, pool)
	// Migrating again is a no-op; several processes may do it at once.
	errc := make(chan error, 4)
	for range 4 {
		go func() { errc <- postgres.Migrate(ctx, pool, schema) }()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".schema_version SET version = version + 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema}); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema = %v, want ErrSchemaTooNew", err)
	}
	if err := postgres.Migrate(ctx, pool, schema); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Migrate of a newer schema = %v, want ErrSchemaTooNew", err)
	}
	unmigrated := "lh_test_never_migrated"
	if _, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: unmigrated}); err == nil {
		t.Fatal("Open of an unmigrated schema succeeded")
	}
}

// Connecting gives up after 10 s unless the DSN says otherwise.
func TestPoolConfigConnectTimeout(t *testing.T) {
	for dsn, want := range map[string]time.Duration{
		"postgres://u@db.example/app":                         postgres.DefaultConnectTimeout,
		"postgres://u@db.example/app?connect_timeout=3":       3 * time.Second,
		"host=db.example user=u dbname=app":                   postgres.DefaultConnectTimeout,
		"host=db.example user=u dbname=app connect_timeout=2": 2 * time.Second,
	} {
		pc, err := postgres.PoolConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := pc.ConnConfig.ConnectTimeout; got != want {
			t.Fatalf("%s: connect timeout %s, want %s", dsn, got, want)
		}
	}
	if _, err := postgres.PoolConfig("postgres://u@h:notaport/db"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a malformed DSN: %v, want ErrInvalid", err)
	}
}

// dsnWith is the test server's DSN with the URL parameters params added.
func dsnWith(t *testing.T, params string) string {
	t.Helper()
	dsn, sep := pgtest.DSN(t), "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + params
}

// Without LISTEN (leasehold_listen=off in the DSN, as behind PgBouncer in
// transaction mode), the store opens no listening connection, the server
// never sees the parameter (it would refuse an unknown one), and the store
// works.
func TestPollOnly(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	polling, err := postgres.Open(ctx, postgres.Config{DSN: dsnWith(t, "leasehold_listen=off"), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer polling.Close()
	var listeners int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'||$1||'%'`, schema).Scan(&listeners); err != nil {
		t.Fatal(err)
	}
	if listeners != 0 {
		t.Fatalf("%d connections listen for a poll-only store", listeners)
	}
	select {
	case <-polling.Listening():
		t.Fatal("a poll-only store says it listens")
	default:
	}
	other, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Enqueue(ctx, []store.NewMessage{{Queue: "q", Payload: []byte("polled")}}); err != nil {
		t.Fatal(err)
	}
	ds, err := polling.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 || string(ds[0].Payload) != "polled" {
		t.Fatalf("a poll-only store claimed %v, %v", ds, err)
	}
	if _, err := postgres.Open(ctx, postgres.Config{DSN: dsnWith(t, "leasehold_listen=maybe"), Schema: schema}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("leasehold_listen=maybe: %v, want ErrInvalid", err)
	}
}

// A poll-only store's connections prepare no named statement: behind a
// pooler in transaction mode, the next transaction may run on a server
// connection where another client's statement holds the name, or where
// this one's is missing. With its pool of one connection, every statement
// of an enqueue, claim, completion, extension and reap runs on the
// connection the test then looks at.
func TestPollOnlyPreparesNothing(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	for _, tc := range []struct {
		params string
		named  bool
	}{
		{"pool_max_conns=1", true},
		{"pool_max_conns=1&leasehold_listen=off", false},
	} {
		st, err := postgres.Open(ctx, postgres.Config{DSN: dsnWith(t, tc.params), Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "q", Payload: []byte("a")}, {Queue: "q", Key: "k", Payload: []byte("b")}}); err != nil {
			t.Fatal(err)
		}
		ds, err := st.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 2, LeaseDuration: time.Minute})
		if err != nil || len(ds) != 2 {
			t.Fatalf("%s: claimed %d, %v", tc.params, len(ds), err)
		}
		if _, err := st.Extend(ctx, []store.Lease{ds[0].Lease}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}, {Lease: ds[1].Lease}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		var named int
		if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements", pgx.QueryExecModeSimpleProtocol).Scan(&named); err != nil {
			t.Fatal(err)
		}
		if (named > 0) != tc.named {
			t.Fatalf("%s: %d named statements prepared on the connection, want some: %t", tc.params, named, tc.named)
		}
		mode := pgx.QueryExecModeCacheStatement
		if !tc.named {
			mode = pgx.QueryExecModeCacheDescribe
		}
		pc, err := postgres.PoolConfig(dsnWith(t, tc.params))
		if err != nil || pc.ConnConfig.DefaultQueryExecMode != mode {
			t.Fatalf("PoolConfig(%s): mode %v, %v; want %v", tc.params, pc.ConnConfig.DefaultQueryExecMode, err, mode)
		}
	}
}

// A cancel racing the completion of its key's head never brings the
// cancelled message back: whichever commits first, the cancelled message
// stays cancelled and the key's next one becomes its head.
func TestCancelRacingPromotion(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 40 {
		key := "k" + strings.Repeat("x", i%3) + string(rune('a'+i%26))
		res, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Key: key}, {Queue: "q", Key: key}, {Queue: "q", Key: key}})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim: %v, %v", ds, err)
		}
		done := make(chan error, 2)
		go func() {
			_, err := s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}})
			done <- err
		}()
		go func() {
			_, err := s.Cancel(ctx, "q", []int64{res[1].ID})
			done <- err
		}()
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		states := map[int64]store.State{}
		for _, st := range []store.State{store.Pending, store.Waiting, store.Cancelled} {
			infos, err := s.List(ctx, store.ListFilter{Queue: "q", State: st, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				states[in.ID] = st
			}
		}
		if states[res[1].ID] != store.Cancelled || states[res[2].ID] != store.Pending {
			t.Fatalf("round %d: the cancelled message is %s and the next one %s; want cancelled and pending",
				i, states[res[1].ID], states[res[2].ID])
		}
		ds, err = s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute})
		if err != nil || len(ds) != 1 || ds[0].MessageID != res[2].ID {
			t.Fatalf("round %d: claimed %v, %v; want the key's last message", i, ds, err)
		}
		if _, err := s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil {
			t.Fatal(err)
		}
	}
}

// A give-back of a run's first message (a retried failure) and the
// completion of the run's second, at once, lock the same row and key in
// opposite orders; the server rolls one back as a deadlock's victim, and
// Settle runs it again: neither caller sees an error.
func TestRunGiveBackRacingCompletion(t *testing.T) {
	ctx := context.Background()
	// Deadlocks are found after deadlock_timeout (1 s by default).
	pool, err := pgxpool.New(ctx, dsnWith(t, "deadlock_timeout=20ms"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the schema's cleanup, which needs the pool
	s, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 60 {
		key := "k" + strconv.Itoa(i)
		if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Key: key}, {Queue: "q", Key: key}}); err != nil {
			t.Fatal(err)
		}
		ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 2, LeaseDuration: time.Minute, Runs: true})
		if err != nil || len(ds) != 2 {
			t.Fatalf("claim: %v, %v", ds, err)
		}
		done := make(chan error, 2)
		go func() {
			_, err := s.Fail(ctx, store.Failure{Lease: ds[0].Lease, Error: "boom", RetryDelay: time.Hour})
			done <- err
		}()
		go func() {
			_, err := s.Complete(ctx, []store.Completion{{Lease: ds[1].Lease}})
			done <- err
		}()
		for range 2 {
			if err := <-done; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
}

// A DeleteQueue that meets a transaction moving a message into the queue
// (which holds the queue's record, as a transfer does) waits for it, then
// deletes what it moved too: the deleted queue keeps no message. The
// move's transaction is written here by hand, so that it can stay open
// while DeleteQueue waits.
func TestDeleteQueueWaitsForAMoveIntoIt(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.CreateQueue(ctx, "dlq", nil); err != nil {
		t.Fatal(err)
	}
	res, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "src", Payload: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	quoted := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+quoted+`.queues WHERE queue = 'dlq' FOR KEY SHARE`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+quoted+`.messages SET queue = 'dlq' WHERE id = $1`, res[0].ID); err != nil {
		t.Fatal(err)
	}
	type deleted struct {
		n   int
		err error
	}
	done := make(chan deleted, 1)
	go func() {
		n, err := s.DeleteQueue(ctx, "dlq")
		done <- deleted{n, err}
	}()
	// Until DeleteQueue waits for the move's lock.
	waitForLock(t, pool, quoted+"%DELETE", func() {
		select {
		case d := <-done:
			t.Fatalf("DeleteQueue = %d, %v before the move committed; want it to wait", d.n, d.err)
		default:
		}
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if d := <-done; d.err != nil || d.n != 1 {
		t.Fatalf("DeleteQueue = %d, %v; want the moved message deleted", d.n, d.err)
	}
	st, err := s.Stats(ctx, "dlq")
	if err != nil || st.Pending != 0 {
		t.Fatalf("the deleted queue's stats: %+v, %v; want no message", st, err)
	}
}

// A completion that meets a renewal of its own lease, committed while it
// ran, completes the message all the same: complete finds the row
// version that the renewal replaced, and completeAgain the new one.
func TestCompletionRacingRenewal(t *testing.T) {
	s, _, errs, err := completeRacing(t, 2, `UPDATE {s}.messages SET locked_until = locked_until + interval '1 minute' WHERE id = $1`)
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Complete = %v, %v; want both completed", errs, err)
	}
	st, err := s.Stats(context.Background(), "q")
	if err != nil || st.Completed != 2 || st.Processing != 0 {
		t.Fatalf("Stats = %+v, %v; want 2 completed", st, err)
	}
}

// A completion whose lease was reaped and its message claimed again while
// it ran completes nothing: the row it finds by address is tested again,
// at its latest version, against the tokens of the rows found, whatever
// the server makes of the address.
func TestStaleCompletionRacingNewClaim(t *testing.T) {
	s, ds, errs, err := completeRacing(t, 1, `UPDATE {s}.messages SET fencing_token = nextval('{s}.fence'), worker_id = 'other',
		deliveries = deliveries + 1, locked_until = locked_until + interval '1 minute' WHERE id = $1`)
	if err != nil || !errors.Is(errs[0], store.ErrLeaseLost) {
		t.Fatalf("Complete = %v, %v; want the lease lost", errs, err)
	}
	in, err := s.Get(context.Background(), ds[0].MessageID)
	if err != nil || in.State != store.Processing || in.FencingToken <= ds[0].FencingToken {
		t.Fatalf("Get = %+v, %v; want processing under the new claim's token", in, err)
	}
}

// completeRacing claims n messages of queue q and completes them all
// while a transaction that ran change (its schema written {s}, the first
// message's id its $1) on the first is open, written here by hand so that
// it stays open until the completion waits for it; then it commits, and
// returns the completion's outcome.
func completeRacing(t *testing.T, n int, change string) (*postgres.Store, []store.Delivery, []error, error) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	msgs := make([]store.NewMessage, n)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: "q", Payload: []byte("x")}
	}
	if _, err := s.Enqueue(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: n, LeaseDuration: time.Minute})
	if err != nil || len(ds) != n {
		t.Fatalf("Claim = %d, %v; want %d", len(ds), err, n)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	quoted := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, strings.ReplaceAll(change, "{s}", quoted), ds[0].MessageID); err != nil {
		t.Fatal(err)
	}
	type completed struct {
		errs []error
		err  error
	}
	done := make(chan completed, 1)
	cs := make([]store.Completion, n)
	for i, d := range ds {
		cs[i] = store.Completion{Lease: d.Lease}
	}
	go func() {
		errs, err := s.Complete(ctx, cs)
		done <- completed{errs, err}
	}()
	waitForLock(t, pool, quoted+"%ctid", func() {
		select {
		case c := <-done:
			t.Fatalf("Complete = %v, %v before the other transaction committed; want it to wait", c.errs, c.err)
		default:
		}
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-done
	return s, ds, c.errs, c.err
}

// waitForLock returns once a statement whose text matches the LIKE
// pattern %like% waits for a lock; ended, called between looks, fails
// the test if the statement ended instead.
func waitForLock(t *testing.T, pool *pgxpool.Pool, like string, ended func()) {
	t.Helper()
	for {
		var waiting bool
		if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%')`, like).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		ended()
	}
}
