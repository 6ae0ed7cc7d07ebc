package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
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

// enqueue --priority orders the claims of a queue; out of range is a usage
// error that enqueues nothing.
func TestEnqueuePriority(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "prio.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "p", "low").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "p", "--priority", "7", "high").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "p", "--priority", "-2", "lowest").must(t)
	for _, p := range []string{"1001", "-1001", "x"} {
		r := runBin(t, dir, "", "--db", db, "enqueue", "--queue", "p", "--priority", p, "bad")
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "priority") {
			t.Fatalf("--priority %s: exit %d, stderr %q; want a one-line usage error naming the priority", p, r.code, r.stderr)
		}
	}
	lines := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "p", "--json").must(t).stdout)
	if len(lines) != 3 || lines[1]["priority"] != 7.0 {
		t.Fatalf("list --json: %v, want 3 messages, the second of priority 7", lines)
	}
	// One at a time, so that the output is in claim order.
	handler := writeScript(t, dir, "cat >> order\necho >> order\n")
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "p", "--concurrency", "1", "--drain", "--", handler).must(t)
	order, err := os.ReadFile(filepath.Join(dir, "order"))
	if err != nil {
		t.Fatal(err)
	}
	if string(order) != "high\nlow\nlowest\n" {
		t.Fatalf("ran in the order %q, want high, low, lowest", order)
	}
}

// work --periodic enqueues its payload at every tick; two workers with the
// same value enqueue each tick once between them.
func TestWorkPeriodic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "periodic.db")
	runBin(t, dir, "", "--db", db, "migrate").must(t)
	handler := writeScript(t, dir, "cat >> ticks\necho >> ticks\n")
	var workers []*exec.Cmd
	for range 2 {
		w, _ := startProcess(t, dir, "--db", db, "--log-level", "error", "work", "--queue", "p", "--periodic", "every 1s|tick", "--", handler)
		workers = append(workers, w)
	}
	waitUntil(t, "three ticks run", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "ticks"))
		return strings.Count(string(b), "tick\n") >= 3
	})
	for _, w := range workers {
		if err := w.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := w.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	done := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "p", "--state", "completed", "--json").must(t).stdout)
	// A dedup id ends with its tick's time: one message per tick.
	seen := map[string]bool{}
	for _, m := range done {
		id, _ := m["dedup_id"].(string)
		tick := id[strings.LastIndex(id, ":")+1:]
		if m["payload"] != "tick" || m["kind"] != "periodic" || tick == "" || seen[tick] {
			t.Fatalf("completed %v: want periodic ticks, each once", done)
		}
		seen[tick] = true
	}
	for _, bad := range []string{"every 1s", "every soon|x", "61 * * * *|x", "|x", "0 0 30 2 *|x"} {
		r := runBin(t, dir, "", "--db", db, "work", "--queue", "p", "--periodic", bad, "--", handler)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--periodic") {
			t.Fatalf("--periodic %q: exit %d, stderr %q; want a one-line usage error", bad, r.code, r.stderr)
		}
	}
}

// stats counts the delayed messages apart, as a part of the pending.
func TestStatsCountDelayed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "delayed.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "d", "now").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "d", "--delay", "1h", "later").must(t)
	lines := jsonLines(t, runBin(t, dir, "", "--db", db, "stats", "--queue", "d", "--json").must(t).stdout)
	if len(lines) != 1 || lines[0]["pending"].(float64) != 2 || lines[0]["delayed"].(float64) != 1 {
		t.Fatalf("stats --json: %v, want 2 pending of which 1 delayed", lines)
	}
	table := runBin(t, dir, "", "--db", db, "stats").must(t).stdout
	if !strings.Contains(table, "DELAYED") || !regexp.MustCompile(`(?m)^d\s+2\s+1\s+0\s`).MatchString(table) {
		t.Fatalf("the stats table lacks the delayed column:\n%s", table)
	}
}
