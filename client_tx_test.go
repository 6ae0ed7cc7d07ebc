package leasehold_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// testEnqueueTx enqueues a job in a transaction that commits and one in a
// transaction that rolls back: each is seen inside its transaction, and
// only the first is there afterwards. Each result names its job; a second
// enqueue of a dedup id, in the same transaction and in a later one, is a
// duplicate that names the first. The job's metadata is stored with it.
func testEnqueueTx[TTx any](t *testing.T, c *leasehold.Client[TTx], st store.Store, lister store.TxLister[TTx], begin func() (TTx, func(commit bool) error)) {
	t.Helper()
	ctx := context.Background()
	opts := &leasehold.EnqueueOptions{Key: "customer-1", DedupID: "order-1", Metadata: map[string]string{"order": "1"}}
	var committed int64
	for _, commit := range []bool{true, false} {
		tx, end := begin()
		res, err := c.EnqueueTx(ctx, tx, sendEmail{To: "ann"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		job := leaseholdtest.RequireEnqueuedTx(ctx, t, lister, tx, sendEmail{To: "ann"}, &leaseholdtest.RequireOpts{Key: "customer-1"})
		if res.ID != job.ID || res.Duplicate != !commit || job.Metadata["order"] != "1" {
			t.Fatalf("EnqueueTx = %+v, want job %d with its metadata (%q), a duplicate only in the second transaction", res, job.ID, job.Metadata)
		}
		if commit {
			committed = res.ID
			again, err := c.EnqueueTx(ctx, tx, sendEmail{To: "ann"}, opts)
			if err != nil || !again.Duplicate || again.ID != res.ID {
				t.Fatalf("EnqueueTx of the same dedup id in the same transaction = %+v, %v; want a duplicate of %d", again, err, res.ID)
			}
		} else if res.ID != committed {
			t.Fatalf("EnqueueTx after the commit = %+v, want a duplicate of %d", res, committed)
		}
		if err := end(commit); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := st.List(ctx, store.ListFilter{Queue: leasehold.DefaultQueue, State: store.Pending})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != committed || infos[0].Kind != "send_email" || string(infos[0].Payload) != `{"to":"ann"}` || infos[0].Key != "customer-1" {
		t.Fatalf("after a commit and a rollback: %+v, want the committed job only", infos)
	}
}

func TestEnqueueTxSQLite(t *testing.T) {
	c, st, _ := txSQLite(t)
	testEnqueueTx(t, c, st, st, sqlBegin(t, st.DB()))
}

func TestEnqueueTxPostgres(t *testing.T) {
	c, st, pool := txPostgres(t)
	testEnqueueTx(t, c, st, st, pgxBegin(t, pool))
}

// txSQLite opens a SQLite store for a transaction test, with a client of
// it and another store on the same file, which sees what another process
// would; the stores are closed when the test ends.
func txSQLite(t *testing.T) (*leasehold.Client[*sql.Tx], *sqlite.Store, *sqlite.Store) {
	path := filepath.Join(t.TempDir(), "tx.db")
	var sts [2]*sqlite.Store
	for i := range sts {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		sts[i] = st
	}
	c, err := leasehold.NewClient(sts[0], leasehold.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return c, sts[0], sts[1]
}

// txPostgres opens a PostgreSQL store in a schema of its own for a
// transaction test, with a client of it and its pool.
func txPostgres(t *testing.T) (*leasehold.Client[pgx.Tx], *postgres.Store, *pgxpool.Pool) {
	pool := pgtest.Pool(t)
	st, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return c, st, pool
}

// A program whose queries go through database/sql enqueues in its
// transactions on PostgreSQL too.
func TestEnqueueTxPostgresDatabaseSQL(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	st, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := leasehold.NewClient(st.SQL(), leasehold.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	testEnqueueTx(t, c, st, st.SQL(), sqlBegin(t, db))
}

// sqlBegin returns a function that begins a transaction on db and gives
// it with the function that ends it, committing or rolling back; one left
// open by a failed test is rolled back when the test ends.
func sqlBegin(t *testing.T, db *sql.DB) func() (*sql.Tx, func(commit bool) error) {
	return func() (*sql.Tx, func(bool) error) {
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		return tx, func(commit bool) error {
			if commit {
				return tx.Commit()
			}
			return tx.Rollback()
		}
	}
}

// pgxBegin is sqlBegin for a pgx pool.
func pgxBegin(t *testing.T, pool *pgxpool.Pool) func() (pgx.Tx, func(commit bool) error) {
	ctx := context.Background()
	return func() (pgx.Tx, func(bool) error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		return tx, func(commit bool) error {
			if commit {
				return tx.Commit(ctx)
			}
			return tx.Rollback(ctx)
		}
	}
}

// ExampleClient_EnqueueTx_postgres needs a database, so this test runs it,
// in a schema of its own for the application's table, and checks what it
// prints.
func TestExampleOutboxPostgres(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	app := "lh_example_" + hex.EncodeToString(b[:])
	drop := func() {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+app+" CASCADE; DROP SCHEMA IF EXISTS shop_jobs CASCADE"); err != nil {
			t.Fatal(err)
		}
	}
	drop()
	t.Cleanup(drop)
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+app); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", app)
	u.RawQuery = q.Encode()
	t.Setenv("DATABASE_URL", u.String())
	out := captureStdout(t, ExampleClient_EnqueueTx_postgres)
	if out != "jobs waiting after the commit: 1\n" {
		t.Fatalf("the example printed %q", out)
	}
	var orders int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+app+".orders").Scan(&orders); err != nil || orders != 1 {
		t.Fatalf("orders: %d (%v), want the one the example committed", orders, err)
	}
}

// captureStdout runs f and returns what it wrote to standard output.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	read := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	f()
	os.Stdout = saved
	w.Close()
	return <-read
}
