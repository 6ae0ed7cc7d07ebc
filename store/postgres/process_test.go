package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
)

const (
	envWorkerSchema = "LEASEHOLD_TEST_WORKER_SCHEMA"
	envWorkerTotal  = "LEASEHOLD_TEST_WORKER_TOTAL"
)

// work claims, logs and completes messages of queue "q" until total of them
// are completed. Each handling is logged with the database's clock between
// its claim and its completion, so overlapping work on one key would show.
func work(ctx context.Context, s *postgres.Store, pool *pgxpool.Pool, schema, worker string, total int, lease time.Duration, progress func()) error {
	for {
		st, err := s.Stats(ctx, "q")
		if err != nil {
			return err
		}
		if st.Completed >= int64(total) {
			return nil
		}
		ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: worker, Max: 10, LeaseDuration: lease})
		if err != nil {
			return err
		}
		cs := make([]store.Completion, len(ds))
		for i, d := range ds {
			cs[i] = store.Completion{Lease: d.Lease}
			if _, err := pool.Exec(ctx, "INSERT INTO "+schema+".worklog (message_id, key, worker, started) VALUES ($1, $2, $3, clock_timestamp())",
				d.MessageID, d.Key, worker); err != nil {
				return err
			}
		}
		for _, d := range ds {
			if _, err := pool.Exec(ctx, "UPDATE "+schema+".worklog SET ended = clock_timestamp() WHERE message_id = $1 AND worker = $2 AND ended IS NULL",
				d.MessageID, worker); err != nil {
				return err
			}
		}
		res, err := s.Complete(ctx, cs)
		if err != nil {
			return err
		}
		for _, e := range res {
			if e != nil {
				return e
			}
		}
		if progress != nil && len(ds) > 0 {
			progress()
		}
	}
}

// TestWorkerProcess is the body of the worker processes that
// TestManyProcesses starts; run on its own it does nothing.
func TestWorkerProcess(t *testing.T) {
	schema := os.Getenv(envWorkerSchema)
	if schema == "" {
		return
	}
	total, err := strconv.Atoi(os.Getenv(envWorkerTotal))
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.Pool(t)
	s := openLive(t, pool, schema)
	if err := work(context.Background(), s, pool, schema, fmt.Sprintf("pid-%d", os.Getpid()), total, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
}

func prepareRun(t *testing.T, pool *pgxpool.Pool, s *postgres.Store, schema string, total, keys int) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+schema+".worklog (message_id bigint, key text, worker text, started timestamptz, ended timestamptz)"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i += 100 {
		batch := make([]store.NewMessage, 100)
		for j := range batch {
			batch[j] = store.NewMessage{Queue: "q", Payload: []byte("x")}
			if (i+j)%2 == 0 {
				batch[j].Key = fmt.Sprint("k", (i+j)%keys)
			}
		}
		if _, err := s.Enqueue(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRun verifies that every message was completed and nothing died;
// with ordered set, also that no key ever had two messages in flight and
// that each key's messages started in enqueue order. (A run with killed
// connections leaves log rows of work whose completion was lost, so it
// checks only the first part.)
func checkRun(t *testing.T, pool *pgxpool.Pool, s *postgres.Store, schema string, total int, ordered bool) {
	t.Helper()
	ctx := context.Background()
	st, err := s.Stats(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if st.Completed != int64(total) || st.Dead != 0 || st.Pending+st.Waiting+st.Processing != 0 {
		t.Fatalf("stats after the run: %+v", st)
	}
	var handled, distinct int
	if err := pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT message_id) FROM "+schema+".worklog WHERE ended IS NOT NULL").Scan(&handled, &distinct); err != nil {
		t.Fatal(err)
	}
	if distinct != total {
		t.Fatalf("%d distinct messages handled, want %d", distinct, total)
	}
	if !ordered {
		return
	}
	if handled != total {
		t.Fatalf("%d handlings of %d messages: some message was handled twice", handled, total)
	}
	var overlaps int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.worklog a JOIN `+schema+`.worklog b
		ON a.key = b.key AND a.key <> '' AND a.message_id < b.message_id
		AND a.started < COALESCE(b.ended, 'infinity') AND b.started < COALESCE(a.ended, 'infinity')`).Scan(&overlaps); err != nil {
		t.Fatal(err)
	}
	if overlaps != 0 {
		t.Fatalf("%d pairs of messages of one key were in flight at once", overlaps)
	}
	var order int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.worklog a JOIN `+schema+`.worklog b
		ON a.key = b.key AND a.key <> '' AND a.message_id < b.message_id AND b.started < a.started`).Scan(&order); err != nil {
		t.Fatal(err)
	}
	if order != 0 {
		t.Fatalf("%d pairs of messages of one key ran out of enqueue order", order)
	}
}

func TestManyProcesses(t *testing.T) {
	testproc.SkipShort(t, "runs four worker processes on one database")
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s := openLive(t, pool, schema)
	const total, procs = 2000, 4
	prepareRun(t, pool, s, schema, total, 25)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testproc.Run(ctx, t, procs, "TestWorkerProcess", envWorkerSchema+"="+schema, envWorkerTotal+"="+strconv.Itoa(total))
	var workers int
	if err := pool.QueryRow(ctx, "SELECT count(DISTINCT worker) FROM "+schema+".worklog").Scan(&workers); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d worker processes handled messages", workers)
	checkRun(t, pool, s, schema, total, true)
}

// TestConnectionLoss terminates the workers' database connections in the
// middle of a run: operations fail, the pool reconnects, the workers retry,
// and every message is still completed once.
func TestConnectionLoss(t *testing.T) {
	testproc.SkipShort(t, "terminates the workers' live connections mid-run")
	admin := pgtest.Pool(t)
	schema := pgtest.Schema(t, admin)
	setup := openLive(t, admin, schema)
	const total = 1000
	prepareRun(t, admin, setup, schema, total, 10)

	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	app := "leasehold_" + schema
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := openLive(t, pool, schema)

	var mu sync.Mutex
	failures := 0
	progress := make(chan struct{}, 1)
	signal := func() {
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	// A short lease and a reaper, as in production: a completion lost with
	// its connection leaves a lease that the reaper gives back.
	const lease = 2 * time.Second
	reaperDone := make(chan struct{})
	go func() {
		defer close(reaperDone)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_, _ = s.Reap(ctx) // a killed connection fails a run; the next one retries
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := work(ctx, s, pool, schema, fmt.Sprint("w", w), total, lease, signal)
				if err == nil {
					return
				}
				mu.Lock()
				failures++
				mu.Unlock()
			}
		}()
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	// Kill the workers' connections, LISTEN included, while they run.
	for kills := 0; kills < 5; {
		select {
		case <-workersDone:
			kills = 5
			continue
		case <-ctx.Done():
			t.Fatal("the run stalled")
		case <-progress:
		}
		var done int64
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".messages WHERE state = 3").Scan(&done); err != nil {
			t.Fatal(err)
		}
		if done < int64(kills+1)*total/7 {
			continue
		}
		tag, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kill %d: terminated %d connections at %d completed", kills+1, tag.RowsAffected(), done)
		kills++
	}
	<-workersDone
	if ctx.Err() != nil {
		t.Fatal("the run did not finish in time")
	}
	cancel()
	<-reaperDone
	t.Logf("workers saw %d failed passes and recovered", failures)
	checkRun(t, admin, setup, schema, total, false)
}
