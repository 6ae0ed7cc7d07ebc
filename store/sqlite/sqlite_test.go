package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
	"github.com/leasehold/leasehold/store/storetest"
)

func open(t *testing.T, clk clock.Clock) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "lh.db"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store { return open(t, clk) })
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lh.db")
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(fmt.Sprintf("PRAGMA user_version = %d", sqlite.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(sqlite.SchemaVersion+1)) {
		t.Fatalf("error %q does not name the database's version", err)
	}
}

func TestRejectsBadPath(t *testing.T) {
	for _, p := range []string{"", "a\x00.db"} {
		if _, err := sqlite.Open(context.Background(), sqlite.Config{Path: p}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", p, err)
		}
	}
}

// A path is a file name, never a URI: '?', '#' and '%' are part of it.
func TestPathIsTakenAsWritten(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.db?mode=ro", "b#c.db", "d%41.db"} {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, name)})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("Open(%q) made no file of that name: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "dA.db")); err == nil {
		t.Fatal("a path was percent-decoded")
	}
}

// TestClaimsAtomicAcrossConnections runs two stores on one file, each with
// its own connection as separate processes would have, claiming at once.
func TestClaimsAtomicAcrossConnections(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lh.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	const total = 2000
	batch := make([]store.NewMessage, total)
	for i := range batch {
		batch[i] = store.NewMessage{Queue: "q", Payload: []byte("x")}
		if i%4 == 0 {
			batch[i].Key = fmt.Sprint("k", i%40)
		}
	}
	if _, err := stores[0].Enqueue(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	claimed := map[int64]int{}
	var wg sync.WaitGroup
	errc := make(chan error, len(stores))
	for w, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: fmt.Sprint("w", w), Max: 50, LeaseDuration: time.Hour})
				if err != nil {
					errc <- err
					return
				}
				if len(ds) == 0 {
					st, err := s.Stats(ctx, "q")
					if err != nil {
						errc <- err
						return
					}
					if st.Pending == 0 && st.Waiting == 0 {
						return
					}
				}
				cs := make([]store.Completion, len(ds))
				mu.Lock()
				for i, d := range ds {
					claimed[d.MessageID]++
					cs[i] = store.Completion{Lease: d.Lease}
				}
				mu.Unlock()
				res, err := s.Complete(ctx, cs)
				if err != nil {
					errc <- err
					return
				}
				for _, e := range res {
					if e != nil {
						errc <- e
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if len(claimed) != total {
		t.Fatalf("%d messages claimed, want %d", len(claimed), total)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Fatalf("message %d claimed %d times", id, n)
		}
	}
}

func TestEnqueueInCallerTransaction(t *testing.T) {
	ctx := context.Background()
	s := open(t, nil)
	msgs := []store.NewMessage{{Queue: "q", Payload: []byte("outbox"), Key: "k"}}

	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "CREATE TABLE orders (id INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueTx(ctx, tx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx, "q"); st.Pending != 0 {
		t.Fatalf("a rolled-back enqueue left %d messages", st.Pending)
	}

	tx, err = s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.EnqueueTx(ctx, tx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].MessageID != res[0].ID {
		t.Fatalf("Claim after commit = %+v, %v", ds, err)
	}
}

// Messages enqueued in a caller's transaction keep their attributes.
func TestEnqueueTxKeepsAttributes(t *testing.T) {
	ctx := context.Background()
	s := open(t, nil)
	msgs := []store.NewMessage{{Queue: "q", Attributes: []byte("outbox")}, {Queue: "q", Key: "k"}}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.EnqueueTx(ctx, tx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := s.ListTx(ctx, tx, store.ListFilter{Queue: "q", State: store.Pending})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].ID != res[0].ID || string(infos[0].Attributes) != "outbox" || infos[1].Attributes != nil {
		t.Fatalf("ListTx = %+v; want the attributes, and none for the second", infos)
	}
	ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 2, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 2 || string(ds[0].Attributes) != "outbox" || ds[1].Attributes != nil {
		t.Fatalf("Claim = %+v, %v; want the attributes, and none for the second", ds, err)
	}
}

// Commits are synced to disk unless the caller chooses otherwise.
func TestSynchronousDefaultsToFull(t *testing.T) {
	for _, tc := range []struct {
		setting string
		want    int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 2}, {"full", 2}, {"normal", 1}, {"NORMAL", 1}} {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db"), Synchronous: tc.setting})
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := s.DB().QueryRow("PRAGMA synchronous").Scan(&got); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if got != tc.want {
			t.Fatalf("Synchronous %q: PRAGMA synchronous is %d, want %d", tc.setting, got, tc.want)
		}
	}
	if _, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db"), Synchronous: "off"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Synchronous off: %v, want ErrInvalid", err)
	}
}

// A database migrated by the previous version upgrades in place, its
// completed messages counted.
func TestUpgradeCountsCompletedMessages(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	first, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(sqlstate.Expand(string(first)) + `;
		INSERT INTO leasehold_messages (queue, payload, state, max_deliveries, enqueued_at, visible_at)
		VALUES ('a', x'00', 3, 5, 0, 0), ('a', x'00', 3, 5, 0, 0), ('a', x'00', 0, 5, 0, 0), ('b', x'00', 3, 5, 0, 0);
		PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckUpgraded(t, s)
}
