// Package chaos holds tests that run workers as real processes and hurt
// them: SIGKILL and restart, SIGSTOP past the lease, terminated database
// connections, a full disk. They wait on real processes, so they use real
// time, bounded by generous deadlines.
package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// Child processes are this test binary, started with childRole set.
const (
	childRole   = "LEASEHOLD_CHAOS_ROLE" // "worker" or "stale"
	childDB     = "LEASEHOLD_CHAOS_DB"   // sqlite:PATH or a postgres URL
	childSchema = "LEASEHOLD_CHAOS_SCHEMA"
	childLog    = "LEASEHOLD_CHAOS_LOG" // where handlers append "id token"
	queue       = "chaos"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childRole); role != "" {
		os.Exit(child(role))
	}
	os.Exit(m.Run())
}

func openStore(ctx context.Context, db, schema string) (store.Store, error) {
	if path, ok := strings.CutPrefix(db, "sqlite:"); ok {
		return sqlite.Open(ctx, sqlite.Config{Path: path})
	}
	return postgres.Open(ctx, postgres.Config{DSN: db, Schema: schema})
}

// child runs one role until killed or told to stop, and returns the exit
// status.
func child(role string) int {
	ctx := context.Background()
	st, err := openStore(ctx, os.Getenv(childDB), os.Getenv(childSchema))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer st.Close()
	switch role {
	case "worker":
		return runWorker(ctx, st)
	case "stale":
		return runStale(ctx, st)
	}
	return 3
}

// runWorker works the queue until SIGTERM. Each handler appends its
// message's id and fencing token to the log (one write, O_APPEND: lines
// from several processes do not interleave), then takes a little time.
func runWorker(ctx context.Context, st store.Store) int {
	logf, err := os.OpenFile(os.Getenv(childLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer logf.Close()
	const lease = 2 * time.Second
	w, err := worker.New(worker.Config{Deps: maintenance.Deps{Store: st, Clock: clock.System(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Meter: maintenance.Meter(nil)}, Queues: []worker.QueueConfig{{Name: queue, Concurrency: 10}}, WorkerID: mailbox.NewWorkerID(),
		LeaseDuration: lease, HeartbeatInterval: lease / 3, MaxProcessingTime: 3 * lease, ReapInterval: 500 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, LongPoll: time.Second, ShutdownTimeout: worker.DefaultShutdownTimeout,
		HardStopWait: worker.DefaultHardStopWait,
		Retention:    &maintenance.Retention{Completed: maintenance.DefaultCompletedRetention, Dead: maintenance.DefaultDeadRetention},
		Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			if _, err := fmt.Fprintf(logf, "%d %d\n", m.MessageID, m.FencingToken); err != nil {
				return err
			}
			select {
			case <-time.After(10 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		_ = w.Shutdown(context.Background())
	}()
	fmt.Println("ready")
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runStale receives one message on a 1 s lease, says so, waits for a line
// on stdin (the test freezes it meanwhile), and then tries to complete it,
// printing the outcome.
func runStale(ctx context.Context, st store.Store) int {
	mb := mailbox.New(mailbox.Config{Store: st, Queue: queue, WorkerID: "stale", PollInterval: mailbox.DefaultPollInterval, Clock: clock.System()})
	msgs, err := mb.Receive(ctx, mailbox.ReceiveOptions{Max: 1, Visibility: time.Second, Wait: 10 * time.Second})
	if err != nil || len(msgs) != 1 {
		fmt.Fprintln(os.Stderr, "receive:", len(msgs), err)
		return 3
	}
	fmt.Printf("holding %d %d\n", msgs[0].MessageID, msgs[0].FencingToken)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	errs, err := st.Complete(ctx, []store.Completion{{Lease: msgs[0].Lease}})
	if err == nil {
		err = errs[0]
	}
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		fmt.Println("refused")
	case err == nil:
		fmt.Println("completed")
	default:
		fmt.Println("error", err)
	}
	return 0
}

func start(t *testing.T, role string, env ...string) *testproc.Child {
	t.Helper()
	return testproc.Start(t, append([]string{childRole + "=" + role}, env...)...)
}

// env is what children need to reach the database.
type env struct {
	db, schema string
	st         store.Store
	pool       *pgxpool.Pool // PostgreSQL only
}

func (e env) vars(extra ...string) []string {
	return append([]string{childDB + "=" + e.db, childSchema + "=" + e.schema}, extra...)
}

func sqliteEnv(t *testing.T) env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chaos.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return env{db: "sqlite:" + path, st: st}
}

func postgresEnv(t *testing.T) env {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	st, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	// The children's connections carry the schema's name, so that the
	// test can terminate theirs and nobody else's.
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return env{db: u.String(), schema: schema, st: st, pool: pool}
}

// latestTokens reads the handlers' log: for each message, the highest
// fencing token a handler ran under.
func latestTokens(t *testing.T, path string) map[int64]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	latest := map[int64]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var id, token int64
		if _, err := fmt.Sscan(sc.Text(), &id, &token); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		latest[id] = max(latest[id], token)
	}
	return latest
}

// listAll lists every message of queue in state.
func listAll(t *testing.T, st store.Store, queue string, state store.State) []store.Info {
	t.Helper()
	var all []store.Info
	for after := int64(0); ; {
		infos, err := st.List(context.Background(), store.ListFilter{Queue: queue, State: state, AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatalf("list %s messages of %s: %v", state, queue, err)
		}
		all = append(all, infos...)
		if len(infos) < 1000 {
			return all
		}
		after = infos[len(infos)-1].ID
	}
}

// checkHandlerTokens checks that each completed message completed under
// the latest fencing token a worker's handler ran it under, by the
// handlers' log: no completion came from a lease that had been lost.
func checkHandlerTokens(t *testing.T, completed []store.Info, logPath string) {
	t.Helper()
	latest := latestTokens(t, logPath)
	for _, in := range completed {
		if in.FencingToken != latest[in.ID] {
			t.Fatalf("message %d completed under token %d, but a handler ran under %d", in.ID, in.FencingToken, latest[in.ID])
		}
	}
}

// killAndRestart runs three workers, SIGKILLs a random one and starts a
// new one every second, and, with hurt set, calls it every second too,
// until every message has completed.
func killAndRestart(t *testing.T, e env, n int, hurt func()) {
	ctx := context.Background()
	msgs := make([]store.NewMessage, n)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: queue, Payload: []byte(strconv.Itoa(i)), MaxDeliveries: 1000}
		if i%3 == 0 {
			msgs[i].Key = "k" + strconv.Itoa(i%600) // about 7 messages per key
		}
	}
	for i := 0; i < n; i += 1000 {
		if _, err := e.st.Enqueue(ctx, msgs[i:min(i+1000, n)]); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(t.TempDir(), "handled.log")
	vars := e.vars(childLog + "=" + logPath)
	workers := make([]*testproc.Child, 3)
	for i := range workers {
		workers[i] = start(t, "worker", vars...)
		workers[i].Expect(t, "ready")
	}
	kills := 0
	deadline := time.Now().Add(120 * time.Second)
	for {
		s, err := e.st.Stats(ctx, queue)
		if err == nil && s.Completed == int64(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d kills, not done: %+v (%v)", kills, s, err)
		}
		time.Sleep(time.Second) // the chaos schedule: one kill a second
		i := rand.IntN(len(workers))
		_ = workers[i].Cmd.Process.Signal(syscall.SIGKILL)
		<-workers[i].Done()
		kills++
		workers[i] = start(t, "worker", vars...)
		if hurt != nil {
			hurt()
		}
	}
	for _, w := range workers {
		_ = w.Cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, w := range workers {
		<-w.Done()
	}
	if kills < 3 {
		t.Fatalf("only %d kills happened; make the run longer", kills)
	}
	s, err := e.st.Stats(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	if s.Completed != int64(n) || s.Dead != 0 || s.Pending != 0 || s.Processing != 0 || s.Waiting != 0 {
		t.Fatalf("after the run: %+v, want all %d completed", s, n)
	}
	completed := listAll(t, e.st, queue, store.Completed)
	checkHandlerTokens(t, completed, logPath)
	if len(completed) != n {
		t.Fatalf("listed %d completed messages, want %d", len(completed), n)
	}
	t.Logf("%d messages, %d kills", n, kills)
}

func TestKillAndRestartSQLite(t *testing.T) {
	testproc.SkipShort(t, "kills and restarts worker processes")
	t.Parallel()
	killAndRestart(t, sqliteEnv(t), 4000, nil)
}

func TestKillAndRestartPostgres(t *testing.T) {
	testproc.SkipShort(t, "kills and restarts worker processes")
	t.Parallel()
	e := postgresEnv(t)
	// Every second, besides a worker, every connection of the workers to
	// the database is terminated.
	terminated := 0
	terminate := func() {
		var n int
		err := e.pool.QueryRow(context.Background(),
			"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", e.schema).Scan(&n)
		if err != nil {
			t.Logf("pg_terminate_backend: %v", err)
		}
		terminated += n
	}
	killAndRestart(t, e, 4000, terminate)
	if terminated == 0 {
		t.Fatal("no worker connection was ever terminated")
	}
	t.Logf("%d worker connections terminated", terminated)
}

func testStaleCompletionRefused(t *testing.T, e env) {
	ctx := context.Background()
	res, err := e.st.Enqueue(ctx, []store.NewMessage{{Queue: queue, Payload: []byte("fenced")}})
	if err != nil {
		t.Fatal(err)
	}
	stale := start(t, "stale", e.vars()...)
	line := stale.Expect(t, "holding")
	var id, token int64
	if _, err := fmt.Sscanf(line, "holding %d %d", &id, &token); err != nil || id != res[0].ID {
		t.Fatalf("child holds %q", line)
	}
	// Frozen past its 1 s lease; meanwhile the message is taken back and
	// claimed again.
	if err := stale.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var fresh []store.Delivery
	deadline := time.Now().Add(30 * time.Second)
	for len(fresh) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the message was never claimable again")
		}
		time.Sleep(100 * time.Millisecond) // waiting for a real lease to expire
		if _, err := e.st.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if fresh, err = e.st.Claim(ctx, store.Claim{Queue: queue, WorkerID: "fresh", Max: 1, LeaseDuration: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stale.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stale.Stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	if got := stale.Expect(t, ""); got != "refused" {
		t.Fatalf("the stale worker's completion: %q, want refused", got)
	}
	errs, err := e.st.Complete(ctx, []store.Completion{{Lease: fresh[0].Lease}})
	if err != nil || errs[0] != nil {
		t.Fatalf("the current holder's completion: %v %v", errs, err)
	}
	infos, err := e.st.List(ctx, store.ListFilter{Queue: queue, State: store.Completed})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].FencingToken != fresh[0].FencingToken || fresh[0].FencingToken <= token {
		t.Fatalf("completed: %+v; want once, under the fresh token %d (the stale one was %d)", infos, fresh[0].FencingToken, token)
	}
}

func TestStaleCompletionRefusedSQLite(t *testing.T) {
	testproc.SkipShort(t, "freezes a worker process past its lease")
	t.Parallel()
	testStaleCompletionRefused(t, sqliteEnv(t))
}

func TestStaleCompletionRefusedPostgres(t *testing.T) {
	testproc.SkipShort(t, "freezes a worker process past its lease")
	t.Parallel()
	testStaleCompletionRefused(t, postgresEnv(t))
}

// TestSQLiteDiskFull fills the database (SQLite's max_page_count stands in
// for a full disk: the same SQLITE_FULL error), checks that the failure is
// clear and harmless, and that work resumes once there is room.
func TestSQLiteDiskFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := sqliteEnv(t)
	st := e.st.(*sqlite.Store)
	if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: queue, Payload: []byte("before")}}); err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := st.DB().QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 512*1024)
	_, err := st.Enqueue(ctx, []store.NewMessage{{Queue: queue, Payload: big}, {Queue: queue, Payload: big}})
	if err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("enqueue into a full database: %v, want an error saying it is full", err)
	}
	var check string
	if err := st.DB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity after the failed write: %q, %v", check, err)
	}
	if s, err := st.Stats(ctx, queue); err != nil || s.Pending != 1 {
		t.Fatalf("the failed enqueue left %+v, %v; want the one earlier message", s, err)
	}
	// Room again: the same work goes through.
	if _, err := st.DB().ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: queue, Payload: big}, {Queue: queue, Payload: big}}); err != nil {
		t.Fatalf("enqueue once there is room: %v", err)
	}
	if s, _ := st.Stats(ctx, queue); s.Pending != 3 {
		t.Fatalf("pending %d, want 3", s.Pending)
	}
}
