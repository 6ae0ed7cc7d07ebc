package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A pause outlives the command that set it: another process reads it in
// stats, no worker claims from the paused queue, and resume lets the
// queue's messages run.
func TestQueuePauseAndResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "pause.db")
	paused := func() bool {
		t.Helper()
		lines := jsonLines(t, runBin(t, dir, "", "--db", db, "stats", "--queue", "p", "--json").must(t).stdout)
		if len(lines) != 1 {
			t.Fatalf("stats --json printed %d lines", len(lines))
		}
		return lines[0]["paused"].(bool)
	}
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "p", "one").must(t)
	if paused() {
		t.Fatal("a new queue is paused")
	}
	if out := runBin(t, dir, "", "--db", db, "queue", "pause", "--queue", "p").must(t).stdout; out != "queue p paused\n" {
		t.Fatalf("queue pause printed %q", out)
	}
	if !paused() {
		t.Fatal("stats --json does not say the queue is paused")
	}
	if !strings.Contains(runBin(t, dir, "", "--db", db, "stats").must(t).stdout, "yes") {
		t.Fatal("the stats table does not say the queue is paused")
	}
	handler := writeScript(t, dir, "exit 0\n")
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "p", "--drain", "--", handler).must(t)
	if n := len(jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "p", "--state", "pending", "--json").must(t).stdout)); n != 1 {
		t.Fatalf("%d messages pending after a worker drained the paused queue, want 1", n)
	}
	runBin(t, dir, "", "--db", db, "queue", "resume", "--queue", "p").must(t)
	if paused() {
		t.Fatal("the queue is still paused after resume")
	}
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "p", "--drain", "--", handler).must(t)
	if n := len(jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "p", "--state", "completed", "--json").must(t).stdout)); n != 1 {
		t.Fatalf("%d messages completed after resume, want 1", n)
	}
	for _, args := range [][]string{{"queue", "pause"}, {"queue", "resume", "--queue", ""}, {"queue"}, {"queue", "stop", "--queue", "p"}} {
		r := runBin(t, dir, "", append([]string{"--db", db}, args...)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("%v: exit %d, stderr %q; want a one-line usage error", args, r.code, r.stderr)
		}
	}
}
