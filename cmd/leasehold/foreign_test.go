package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
)

// creators are the commands that may create leasehold's tables; demo works
// on a database of its own.
var creators = []string{"migrate", "enqueue", "work", "serve", "bench", "demo"}

// otherCommandArgs are valid arguments for every other command, by path:
// each must change nothing on a database that is not leasehold's.
var otherCommandArgs = map[string][]string{
	"stats":        nil,
	"list":         {"--queue", "q"},
	"dead list":    {"--queue", "q"},
	"dead redrive": {"--queue", "q"},
	"dead purge":   {"--queue", "q", "--all"},
	"queue pause":  {"--queue", "q"},
	"queue resume": {"--queue", "q"},
	"cancel":       {"--queue", "q", "1"},
	"prune":        {"--queue", "q"},
	"reap":         {"--once"},
}

// leafCommands lists the paths, without "leasehold ", of the commands of
// the tree that run something.
func leafCommands(c *cobra.Command) []string {
	var out []string
	for _, sub := range c.Commands() {
		if sub.HasSubCommands() {
			out = append(out, leafCommands(sub)...)
			continue
		}
		if sub.Runnable() {
			out = append(out, strings.TrimPrefix(sub.CommandPath(), "leasehold "))
		}
	}
	return out
}

// Every command but those that create leasehold's tables refuses a
// database without them, in one line, and leaves it as it was: its bytes,
// its journal mode, no -wal or -shm files.
func TestCommandsRefuseForeignDatabase(t *testing.T) {
	t.Parallel()
	var cmds []string
	for _, path := range leafCommands((&app{}).rootCommand()) {
		if slices.Contains(creators, path) {
			continue
		}
		if _, ok := otherCommandArgs[path]; !ok {
			t.Fatalf("command %q: give it valid arguments in otherCommandArgs", path)
		}
		cmds = append(cmds, path)
	}
	dir := t.TempDir()
	for _, journal := range []string{"delete", "wal"} {
		db, err := sql.Open("sqlite", filepath.Join(dir, journal+".db"))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"PRAGMA journal_mode = " + journal, "CREATE TABLE orders (id INTEGER PRIMARY KEY, what TEXT)", "INSERT INTO orders (what) VALUES ('tea')"} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	before := snapshot(t, dir)
	if len(before) != 2 {
		t.Fatalf("the application's databases left %d files, want 2", len(before))
	}
	refuses := func(t *testing.T, db, path string) {
		t.Helper()
		args := append(append([]string{"--db", db}, strings.Fields(path)...), otherCommandArgs[path]...)
		r := runBin(t, dir, "", args...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "not a leasehold database; run leasehold migrate") || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("leasehold %s: exit %d, stderr %q; want exit %d saying it is not a leasehold database", strings.Join(args, " "), r.code, r.stderr, exitFailure)
		}
	}
	for _, path := range cmds {
		for _, db := range []string{"delete.db", "wal.db", "absent.db"} {
			refuses(t, db, path)
		}
	}
	// The same bytes are the same journal mode too: the header holds it.
	if after := snapshot(t, dir); !sameFiles(before, after) {
		t.Fatalf("commands on a database without leasehold's tables changed the directory: %d files before, %d after", len(before), len(after))
	}
	t.Run("postgres", func(t *testing.T) {
		pg := freshDatabase(t)
		for _, path := range cmds {
			refuses(t, pg, path)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, pg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var schemas int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = 'leasehold'").Scan(&schemas); err != nil || schemas != 0 {
			t.Fatalf("a refused command created the schema: %d, %v", schemas, err)
		}
	})
}
