package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
)

const envWorkerDB = "LEASEHOLD_TEST_SQLITE_WORKER_DB"

// TestWorkerProcess is the body of the processes TestManyProcesses starts;
// run on its own it does nothing. It claims and completes messages of
// queue "q" until none is left, recording each claim in a table that the
// parent checks.
func TestWorkerProcess(t *testing.T) {
	path := os.Getenv(envWorkerDB)
	if path == "" {
		return
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	me := strconv.Itoa(os.Getpid())
	for {
		ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: me, Max: 20, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			st, err := s.Stats(ctx, "q")
			if err != nil {
				t.Fatal(err)
			}
			if st.Pending+st.Waiting+st.Processing == 0 {
				return
			}
			continue
		}
		cs := make([]store.Completion, len(ds))
		for i, d := range ds {
			cs[i] = store.Completion{Lease: d.Lease}
			if _, err := s.DB().ExecContext(ctx, "INSERT INTO claims (message_id, worker) VALUES (?, ?)", d.MessageID, me); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.Complete(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res {
			if e != nil {
				t.Fatal(e)
			}
		}
	}
}

// TestManyProcesses runs four OS processes on one SQLite file: every
// message is claimed exactly once and completed.
func TestManyProcesses(t *testing.T) {
	testproc.SkipShort(t, "runs four worker processes on one file")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "shared.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, "CREATE TABLE claims (message_id INTEGER, worker TEXT)"); err != nil {
		t.Fatal(err)
	}
	const total, procs = 2000, 4
	for i := 0; i < total; i += 100 {
		batch := make([]store.NewMessage, 100)
		for j := range batch {
			batch[j] = store.NewMessage{Queue: "q", Payload: []byte("x")}
			if j%3 == 0 {
				batch[j].Key = fmt.Sprint("k", (i+j)%17)
			}
		}
		if _, err := s.Enqueue(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	testproc.Run(ctx, t, procs, "TestWorkerProcess", envWorkerDB+"="+path)
	var claims, distinct, workers int
	if err := s.DB().QueryRowContext(ctx, "SELECT count(*), count(DISTINCT message_id), count(DISTINCT worker) FROM claims").Scan(&claims, &distinct, &workers); err != nil {
		t.Fatal(err)
	}
	if claims != total || distinct != total {
		t.Fatalf("%d claims of %d distinct messages, want each of %d claimed once", claims, distinct, total)
	}
	t.Logf("%d processes claimed messages", workers)
	st, err := s.Stats(ctx, "q")
	if err != nil || st.Completed != total {
		t.Fatalf("stats %+v, %v", st, err)
	}
}
