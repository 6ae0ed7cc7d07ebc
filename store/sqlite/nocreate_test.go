package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
)

// dirFiles returns the names and contents of the files in dir.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// foreignDB writes an application's own database, without leasehold's
// tables, in the journal mode given, and returns its path.
func foreignDB(t *testing.T, dir, journal string) string {
	t.Helper()
	path := filepath.Join(dir, journal+".db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"PRAGMA journal_mode = " + journal, "CREATE TABLE orders (id INTEGER PRIMARY KEY, what TEXT)", "INSERT INTO orders (what) VALUES ('tea')"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Neither NoCreate nor ReadOnly changes a database that is not leasehold's,
// in either journal mode, or creates a missing one.
func TestNoCreateChangesNoForeignFile(t *testing.T) {
	ctx := context.Background()
	for _, journal := range []string{"delete", "wal"} {
		dir := t.TempDir()
		path := foreignDB(t, dir, journal)
		before := dirFiles(t, dir)
		if len(before) != 1 {
			t.Fatalf("the %s database left %d files, want 1", journal, len(before))
		}
		for _, cfg := range []sqlite.Config{{Path: path, NoCreate: true}, {Path: path, ReadOnly: true}, {Path: filepath.Join(dir, "absent.db"), NoCreate: true}} {
			s, err := sqlite.Open(ctx, cfg)
			if !errors.Is(err, store.ErrNotMigrated) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("Open(%+v) of a %s database without leasehold's tables = %v, want ErrNotMigrated", cfg, journal, err)
			}
		}
		after := dirFiles(t, dir)
		if len(after) != len(before) || !bytes.Equal(after[journal+".db"], before[journal+".db"]) {
			t.Fatalf("opening the %s database changed the directory: %d files before, %d after", journal, len(before), len(after))
		}
	}
}

// NoCreate opens a leasehold database as any open does.
func TestNoCreateOpensLeaseholdDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lh.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q", Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, sqlite.Config{Path: path, NoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(ctx, "q")
	if err != nil || st.Pending != 1 {
		t.Fatalf("Stats after NoCreate = %+v, %v; want the pending message", st, err)
	}
}

// A foreign WAL database left with its -wal and no -shm (copied while it
// was open, or after a crash) is left so: the -shm that reading its -wal
// makes is removed again.
func TestNoCreateLeavesALeftoverWAL(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	path := filepath.Join(src, "app.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{"PRAGMA journal_mode = wal", "PRAGMA wal_autocheckpoint = 0", "CREATE TABLE orders (id INTEGER PRIMARY KEY)", "INSERT INTO orders DEFAULT VALUES"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// A copy of the database and its -wal, taken while it is open.
	dir := t.TempDir()
	for _, name := range []string{"app.db", "app.db-wal"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := dirFiles(t, dir)
	if _, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "app.db"), NoCreate: true}); !errors.Is(err, store.ErrNotMigrated) {
		t.Fatalf("Open of the copy = %v, want ErrNotMigrated", err)
	}
	after := dirFiles(t, dir)
	if len(after) != len(before) {
		names := func(m map[string][]byte) (n []string) {
			for k := range m {
				n = append(n, k)
			}
			return n
		}
		t.Fatalf("the directory held %q before, %q after", names(before), names(after))
	}
}
