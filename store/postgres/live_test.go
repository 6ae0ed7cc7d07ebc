package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
)

// These tests run on the database's own clock, as production does.

func openLive(t *testing.T, pool *pgxpool.Pool, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDatabaseClock(t *testing.T) {
	pool := pgtest.Pool(t)
	s := openLive(t, pool, pgtest.Schema(t, pool))
	ctx := context.Background()
	var dbNow time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Payload: []byte("x")}, {Queue: "q", Payload: []byte("later"), Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Claim = %d, %v; want only the undelayed message", len(ds), err)
	}
	// The lease runs on the database's clock: about a minute after its now().
	if d := ds[0].LeaseExpires.Sub(dbNow); d < time.Minute || d > time.Minute+time.Hour/60 {
		t.Fatalf("lease expires %s after the database's now, want about 1m", d)
	}
	res, err := s.Extend(ctx, []store.Lease{ds[0].Lease}, time.Hour)
	if err != nil || len(res.Lost) != 0 || !res.Expires.After(ds[0].LeaseExpires) {
		t.Fatalf("Extend = %+v, %v", res, err)
	}
	errs, err := s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Complete = %v, %v", errs, err)
	}
	if rs, err := s.Reap(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("Reap = %+v, %v", rs, err)
	}
}

func TestNotifyWakesAnotherProcess(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	producer := openLive(t, pool, schema)
	// The consumer has its own pool, as another process would.
	consumer := openLive(t, pgtest.Pool(t), schema)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case <-consumer.Listening():
	case <-ctx.Done():
		t.Fatal("the consumer never started listening")
	}
	// The consumer's wake-up channel closes only on a notification: the
	// producer's own wake-ups stay in the producer.
	wake := consumer.Wakeup("q")
	if _, err := producer.Enqueue(ctx, []store.NewMessage{{Queue: "q", Payload: []byte("hi")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("the consumer was never woken")
	}
	ds, err := consumer.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Claim after the wake-up = %d messages, %v", len(ds), err)
	}
}

func TestEnqueueInCallerTransaction(t *testing.T) {
	pool := pgtest.Pool(t)
	s := openLive(t, pool, pgtest.Schema(t, pool))
	ctx := context.Background()
	msgs := []store.NewMessage{{Queue: "q", Payload: []byte("outbox"), Key: "k"}}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueTx(ctx, tx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx, "q"); st.Pending != 0 {
		t.Fatalf("a rolled-back enqueue left %d messages", st.Pending)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.EnqueueTx(ctx, tx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].MessageID != res[0].ID {
		t.Fatalf("Claim after commit = %+v, %v", ds, err)
	}
}

func TestEnqueueInCallerSQLTransaction(t *testing.T) {
	pool := pgtest.Pool(t)
	s := openLive(t, pool, pgtest.Schema(t, pool))
	ctx := context.Background()
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Keys and a dedup id take the locks and checks, one statement each.
	msgs := []store.NewMessage{
		{Queue: "q", Payload: []byte("a"), Key: "k", DedupID: "order-1"},
		{Queue: "q", Payload: []byte("b"), Key: "k"},
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueSQLTx(ctx, tx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx, "q"); st.Pending+st.Waiting != 0 {
		t.Fatalf("a rolled-back enqueue left messages: %+v", st)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.EnqueueSQLTx(ctx, tx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := s.EnqueueSQLTx(ctx, tx, msgs[:1])
	if err != nil || !dup[0].Duplicate || dup[0].ID != res[0].ID {
		t.Fatalf("second enqueue of order-1 in the transaction = %+v, %v", dup, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx, "q"); st.Pending != 1 || st.Waiting != 1 {
		t.Fatalf("after commit: %+v, want 1 pending head and 1 waiting", st)
	}
}

// Messages enqueued in a caller's transaction keep their attributes on
// every path: pgx's bulk insert and one statement per message, and
// database/sql's.
func TestEnqueueTxKeepsAttributes(t *testing.T) {
	pool := pgtest.Pool(t)
	s := openLive(t, pool, pgtest.Schema(t, pool))
	ctx := context.Background()
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := map[int64][]byte{}
	enqueued := func(what string, msgs []store.NewMessage, res []store.Enqueued, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i, r := range res {
			want[r.ID] = msgs[i].Attributes
		}
	}
	bulk := []store.NewMessage{{Queue: "q", Attributes: []byte("bulk")}, {Queue: "q"}}
	one := []store.NewMessage{{Queue: "q", Key: "k", Attributes: []byte("keyed")}, {Queue: "q", DedupID: "d"}}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.EnqueueTx(ctx, tx, bulk)
	enqueued("EnqueueTx without keys", bulk, res, err)
	res, err = s.EnqueueTx(ctx, tx, one)
	enqueued("EnqueueTx with a key and a dedup id", one, res, err)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	viaSQL := []store.NewMessage{{Queue: "q", Attributes: []byte("\x00 sql")}, {Queue: "q"}}
	stx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = s.EnqueueSQLTx(ctx, stx, viaSQL)
	enqueued("EnqueueSQLTx", viaSQL, res, err)
	infos, err := s.SQL().ListTx(ctx, stx, store.ListFilter{Queue: "q", State: store.Pending})
	if err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	check := func(what string, id int64, got []byte) {
		t.Helper()
		if string(got) != string(want[id]) || (got == nil) != (want[id] == nil) {
			t.Fatalf("%s: message %d has attributes %q, want %q", what, id, got, want[id])
		}
	}
	if len(infos) != len(want) {
		t.Fatalf("ListTx listed %d messages, want %d", len(infos), len(want))
	}
	for _, in := range infos {
		check("ListTx", in.ID, in.Attributes)
	}
	ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 10, LeaseDuration: time.Minute})
	if err != nil || len(ds) != len(want) {
		t.Fatalf("Claim = %d, %v; want %d", len(ds), err, len(want))
	}
	for _, d := range ds {
		check("Claim", d.MessageID, d.Attributes)
	}
}

// TestCrossingKeyedReplies completes heads of two keys at once, each with a
// reply keyed by the other's key: the transactions take the same advisory
// locks and must not deadlock.
func TestCrossingKeyedReplies(t *testing.T) {
	pool := pgtest.Pool(t)
	s := openLive(t, pool, pgtest.Schema(t, pool))
	ctx := context.Background()
	const rounds = 60
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for _, p := range [][2]string{{"x", "y"}, {"y", "x"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			queue := "q" + p[0]
			for range rounds {
				if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: queue, Payload: []byte("m"), Key: p[0]}}); err != nil {
					errc <- err
					return
				}
				ds, err := s.Claim(ctx, store.Claim{Queue: queue, WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
				if err != nil || len(ds) != 1 {
					errc <- fmt.Errorf("claim: %d, %v", len(ds), err)
					return
				}
				reply := &store.NewMessage{Queue: "q" + p[1], Payload: []byte("r"), Key: p[1]}
				res, err := s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease, Reply: reply}})
				if err != nil {
					errc <- err
					return
				}
				if res[0] != nil {
					errc <- res[0]
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestOutboxNeedsReadCommitted(t *testing.T) {
	pool := pgtest.Pool(t)
	s := openLive(t, pool, pgtest.Schema(t, pool))
	ctx := context.Background()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	_, err = s.EnqueueTx(ctx, tx, []store.NewMessage{{Queue: "q", Payload: []byte("x"), Key: "k"}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("keyed enqueue in a REPEATABLE READ transaction = %v, want ErrInvalid", err)
	}
	// Messages without keys or dedup ids have no order to protect.
	if _, err := s.EnqueueTx(ctx, tx, []store.NewMessage{{Queue: "q", Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaNameLeavesRoomForTheChannel(t *testing.T) {
	ok := strings.Repeat("a", 53)
	if err := postgres.CheckSchema(ok); err != nil {
		t.Fatalf("CheckSchema(53 bytes) = %v", err)
	}
	if err := postgres.CheckSchema(ok + "a"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("CheckSchema(54 bytes) = %v, want ErrInvalid", err)
	}
}

// TestExtendManyLeases renews more leases than one extension statement
// takes: every current lease is renewed, exactly the finished ones are
// reported lost, whichever statement they fell in, and the expiry reported
// is the earliest one set.
func TestExtendManyLeases(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s := openLive(t, pool, schema)
	const n = 1234
	enqueueN(t, s, n)
	leases := claimN(t, s, n, time.Minute)
	finished := []store.Lease{leases[0], leases[600], leases[n-1]}
	if err := completeAll(s, finished); err != nil {
		t.Fatal(err)
	}
	ext, err := s.Extend(ctx, leases, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ext.Lost, finished) {
		t.Errorf("Lost = %v, want %v", ext.Lost, finished)
	}
	var renewed int
	var earliest time.Time
	if err := pool.QueryRow(ctx, `SELECT count(*), min(locked_until) FROM `+schema+`.messages
		WHERE state = 2 AND locked_until > now() + interval '59 minutes'`).Scan(&renewed, &earliest); err != nil {
		t.Fatal(err)
	}
	if renewed != n-len(finished) {
		t.Errorf("%d leases run about an hour, want %d", renewed, n-len(finished))
	}
	if !ext.Expires.Equal(earliest) {
		t.Errorf("Expires = %v, want the earliest expiry %v", ext.Expires, earliest)
	}
}
