package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// prune deletes the queue's finished messages older than asked, each state
// by its own age, and prints how many went.
func TestPrune(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "prune.db")
	db := "sqlite:" + path
	runBin(t, dir, "a\nb\nc\n", "--db", db, "enqueue", "--queue", "p").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "p", "--max-deliveries", "1", "bad").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "other", "kept").must(t)
	handler := writeScript(t, dir, "read -r line; [ \"$line\" = bad ] && exit 65; exit 0\n")
	for _, q := range []string{"p", "other"} {
		runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", q, "--drain", "--", handler).must(t)
	}
	// An hour ago, for every message: past the dedup window.
	sdb, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`UPDATE leasehold_messages SET enqueued_at = enqueued_at - 3600000000, finished_at = finished_at - 3600000000`); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	if out := runBin(t, dir, "", "--db", db, "prune", "--queue", "p", "--completed-older-than", "2h").must(t).stdout; out != "pruned 0 completed, 0 dead, 0 cancelled\n" {
		t.Fatalf("prune of younger messages printed %q", out)
	}
	if out := runBin(t, dir, "", "--db", db, "prune", "--queue", "p", "--completed-older-than", "30m", "--dead-older-than", "forever").must(t).stdout; out != "pruned 3 completed, 0 dead, 0 cancelled\n" {
		t.Fatalf("prune of completed messages printed %q", out)
	}
	if out := runBin(t, dir, "", "--db", db, "prune", "--queue", "p", "--dead-older-than", "30m").must(t).stdout; out != "pruned 0 completed, 1 dead, 0 cancelled\n" {
		t.Fatalf("prune of the dead message printed %q", out)
	}
	stats := jsonLines(t, runBin(t, dir, "", "--db", db, "stats", "--queue", "other", "--json").must(t).stdout)
	if stats[0]["completed"] != 1.0 {
		t.Fatalf("another queue lost its messages: %v", stats[0])
	}
	for _, args := range [][]string{{"prune"}, {"prune", "--queue", "p", "--completed-older-than", "0"}, {"prune", "--queue", "p", "--dead-older-than", "soon"}} {
		r := runBin(t, dir, "", append([]string{"--db", db}, args...)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("%v: exit %d, stderr %q; want a one-line usage error", args, r.code, r.stderr)
		}
	}
}
