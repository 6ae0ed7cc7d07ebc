package leasehold_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// SendEmail is a job: its fields are its args, stored as JSON.
type SendEmail struct {
	To string `json:"to"`
}

// Kind names the job's type; the client runs the job with the handler of
// this kind.
func (SendEmail) Kind() string { return "send_email" }

// A typed job enqueued and run by its handler.
func Example() {
	ctx := context.Background()
	st, err := memory.New(memory.Config{}) // or store/sqlite, store/postgres
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	c, err := leasehold.NewClient(st, leasehold.Config{
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {Concurrency: 10}},
		Logger: quiet(),
	})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[SendEmail]) error {
		fmt.Printf("sending to %s (attempt %d)\n", job.Args.To, job.Attempt)
		close(done)
		return nil
	})
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, SendEmail{To: "ann@example.com"}, &leasehold.EnqueueOptions{Key: "customer-1"}); err != nil {
		log.Fatal(err)
	}
	<-done
	if err := c.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: sending to ann@example.com (attempt 1)
}

// The transactional outbox: an order and the job that follows from it are
// written in one transaction of the application's own database, so there
// is never one without the other.
func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "outbox")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "app.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	db := st.DB() // the application's tables may live in the same file
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT)`); err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet()})
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (email) VALUES (?)`, "ann@example.com"); err != nil {
		log.Fatal(err)
	}
	res, err := c.EnqueueTx(ctx, tx, SendEmail{To: "ann@example.com"}, &leasehold.EnqueueOptions{DedupID: "order-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job", res.ID, "duplicate:", res.Duplicate)
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	s, err := st.Stats(ctx, leasehold.DefaultQueue)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs waiting after the commit:", s.Pending)
	// Output:
	// job 1 duplicate: false
	// jobs waiting after the commit: 1
}

// The outbox on PostgreSQL: the application's order and the job that
// follows from it commit in one pgx transaction. It connects to the
// database DATABASE_URL names.
func ExampleClient_EnqueueTx_postgres() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// leasehold's tables, in a schema of their own.
	if err := postgres.Migrate(ctx, pool, "shop_jobs"); err != nil {
		log.Fatal(err)
	}
	st, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: "shop_jobs"})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, email text)`); err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet()}) // a Client[pgx.Tx]
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // nothing to undo once committed
	if _, err := tx.Exec(ctx, `INSERT INTO orders (email) VALUES ($1)`, "ann@example.com"); err != nil {
		log.Fatal(err)
	}
	if _, err := c.EnqueueTx(ctx, tx, SendEmail{To: "ann@example.com"}, nil); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	s, err := st.Stats(ctx, leasehold.DefaultQueue)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs waiting after the commit:", s.Pending)
}
