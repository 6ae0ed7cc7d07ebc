package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	msqlite "modernc.org/sqlite"
)

func openInternal(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "lh.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitGathered waits until n writes wait for the transaction under way.
func waitGathered(b *backend, n int) {
	for {
		b.gather.mu.Lock()
		got := len(b.gather.waiting)
		b.gather.mu.Unlock()
		if got == n {
			return
		}
		runtime.Gosched()
	}
}

// gatherRound runs a write that holds its transaction until released,
// then the writes of fns, each on its own goroutine once the one before
// waits, then calls waiting, then releases the first; it returns each
// write's transaction and error, the first's last.
func gatherRound(t *testing.T, b *backend, ctxs []context.Context, fns []func(ctx context.Context, tx *sql.Tx) error, waiting func()) ([]*sql.Tx, []error) {
	t.Helper()
	txs := make([]*sql.Tx, len(fns)+1)
	errs := make([]error, len(fns)+1)
	release, holding := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		errs[len(fns)] = b.write(context.Background(), func(ctx context.Context, tx *sql.Tx, _ int64) error {
			txs[len(fns)] = tx
			close(holding)
			<-release
			return nil
		})
	})
	<-holding
	for i, fn := range fns {
		wg.Go(func() {
			errs[i] = b.write(ctxs[i], func(ctx context.Context, tx *sql.Tx, _ int64) error {
				txs[i] = tx
				return fn(ctx, tx)
			})
		})
		waitGathered(b, i+1)
	}
	waiting()
	close(release)
	wg.Wait()
	return txs, errs
}

func insertMeta(name string) func(ctx context.Context, tx *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO leasehold_meta (name, value) VALUES (?, 1)", name)
		return err
	}
}

func metaNames(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	rows, err := s.DB().Query("SELECT name FROM leasehold_meta WHERE name LIKE 't%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names[n] = true
	}
	return names
}

// Writes that wait for the one under way run together in the next
// transaction, in the order they came, and each is answered after it
// commits; the one that failed is rolled back alone.
func TestWaitingWritesShareATransaction(t *testing.T) {
	s := openInternal(t)
	bad := errors.New("refused")
	var order []string
	fns := make([]func(context.Context, *sql.Tx) error, 5)
	ctxs := make([]context.Context, len(fns))
	for i := range fns {
		name := fmt.Sprintf("t%d", i)
		ctxs[i] = context.Background()
		fns[i] = func(ctx context.Context, tx *sql.Tx) error {
			order = append(order, name)
			if err := insertMeta(name)(ctx, tx); err != nil {
				return err
			}
			if i == 2 {
				return bad
			}
			return nil
		}
	}
	txs, errs := gatherRound(t, s.b, ctxs, fns, func() {})
	for i := range fns {
		if i == 2 {
			if !errors.Is(errs[i], bad) {
				t.Fatalf("write %d: %v, want its own error", i, errs[i])
			}
		} else if errs[i] != nil {
			t.Fatalf("write %d: %v", i, errs[i])
		}
		if txs[i] != txs[0] {
			t.Fatalf("write %d ran in a transaction of its own", i)
		}
	}
	if txs[0] == txs[len(fns)] {
		t.Fatal("the waiting writes ran in the transaction they waited for")
	}
	if fmt.Sprint(order) != "[t0 t1 t2 t3 t4]" {
		t.Fatalf("ran in order %v", order)
	}
	if got := metaNames(t, s); len(got) != 4 || got["t2"] {
		t.Fatalf("committed %v, want t0, t1, t3, t4", got)
	}
}

// A write whose context ends while it waits is dropped and never runs; one
// whose context ended is not run either when its turn comes.
func TestCancelledWaitingWriteNeverRuns(t *testing.T) {
	s := openInternal(t)
	ctx, cancel := context.WithCancel(context.Background())
	ctxs := []context.Context{context.Background(), ctx, context.Background()}
	fns := []func(context.Context, *sql.Tx) error{insertMeta("t0"), insertMeta("t1"), insertMeta("t2")}
	// Cancelled once all three wait, before the write they wait for ends.
	_, errs := gatherRound(t, s.b, ctxs, fns, func() {
		cancel()
		waitGathered(s.b, 2)
	})
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], context.Canceled) {
		t.Fatalf("errors %v, want only the cancelled write's", errs)
	}
	if got := metaNames(t, s); len(got) != 2 || got["t1"] {
		t.Fatalf("committed %v, want t0 and t2", got)
	}
}

// A write that ends the transaction (here a failed ROLLBACK TO stands for
// SQLite rolling it back) fails every write gathered with it.
func TestBrokenTransactionFailsEveryGatheredWrite(t *testing.T) {
	s := openInternal(t)
	ctxs := []context.Context{context.Background(), context.Background(), context.Background()}
	fns := []func(context.Context, *sql.Tx) error{insertMeta("t0"), func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "RELEASE gathered"); err != nil {
			return err
		}
		return errors.New("the savepoint is gone")
	}, insertMeta("t2")}
	_, errs := gatherRound(t, s.b, ctxs, fns, func() {})
	for i, err := range errs[:3] {
		if err == nil {
			t.Fatalf("write %d succeeded in a failed transaction", i)
		}
	}
	if got := metaNames(t, s); len(got) != 0 {
		t.Fatalf("committed %v, want nothing", got)
	}
}

// cancelling is the cancel function lh_test_cancel calls.
var cancelling atomic.Pointer[context.CancelFunc]

func init() {
	// lh_test_cancel(x) cancels the context of cancelling when x is 1, in
	// the middle of the statement that calls it, and gives x back.
	msqlite.MustRegisterScalarFunction("lh_test_cancel", 1, func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if x, _ := args[0].(int64); x == 1 {
			(*cancelling.Load())()
			// Time for an interrupt, were one to come, to reach the
			// statement while it runs on.
			runtime.Gosched()
		}
		return args[0], nil
	})
}

// A gathered write whose caller's context ends in the middle of one of its
// statements runs on to its end, and the others with it: a write's
// statements run with the context write hands it, which does not end
// once its transaction has begun. Were the caller's context to interrupt
// the statement, SQLite would roll back the whole transaction, and every
// write gathered in it would fail.
func TestCallerCancelledInAGatheredWrite(t *testing.T) {
	s := openInternal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelling.Store(&cancel)
	ctxs := []context.Context{context.Background(), ctx, context.Background()}
	fns := []func(context.Context, *sql.Tx) error{insertMeta("t0"), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO leasehold_meta (name, value)
			SELECT 't1', max(lh_test_cancel(x)) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT x FROM c)`)
		return err
	}, insertMeta("t2")}
	_, errs := gatherRound(t, s.b, ctxs, fns, func() {})
	if errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("errors %v, want none", errs)
	}
	if ctx.Err() == nil {
		t.Fatal("the caller's context did not end")
	}
	if got := metaNames(t, s); len(got) != 3 {
		t.Fatalf("committed %v, want t0, t1 and t2", got)
	}
}
