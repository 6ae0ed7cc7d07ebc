package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cancel cancels waiting messages, refuses unknown ids without changing
// anything, and leaves finished ones as they were.
func TestCancelCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "cancel.db")
	runBin(t, dir, "one\ntwo\nthree\n", "--db", db, "enqueue", "--queue", "c").must(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cancel", "--queue", "c", "1", "99"}, 1, "no message 99"},
		{[]string{"cancel", "--queue", "other", "1"}, 1, "no message 1"},
		{[]string{"cancel", "--queue", "c"}, 2, "by id"},
		{[]string{"cancel", "--queue", "c", "x"}, 2, `"x" is not a message id`},
		{[]string{"cancel", "--queue", "c", "1", "1"}, 2, "named twice"},
		{[]string{"cancel", "1"}, 2, "--queue is required"},
	} {
		r := runBin(t, dir, "", append([]string{"--db", db}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("%v: exit %d, stderr %q; want exit %d and one line naming %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if out := runBin(t, dir, "", "--db", db, "cancel", "--queue", "c", "1", "2").must(t).stdout; out != "cancelled 2\n" {
		t.Fatalf("cancel printed %q", out)
	}
	if out := runBin(t, dir, "", "--db", db, "cancel", "--queue", "c", "2", "3").must(t).stdout; !strings.HasPrefix(out, "cancelled 1 of 2") {
		t.Fatalf("cancel of a cancelled and a pending message printed %q", out)
	}
	if n := len(jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "c", "--state", "cancelled", "--json").must(t).stdout)); n != 3 {
		t.Fatalf("list --state cancelled shows %d, want 3", n)
	}
	stats := jsonLines(t, runBin(t, dir, "", "--db", db, "stats", "--queue", "c", "--json").must(t).stdout)
	if stats[0]["cancelled"] != 3.0 || stats[0]["pending"] != 0.0 {
		t.Fatalf("stats --json: %v, want 3 cancelled and none pending", stats[0])
	}
}

// A running script whose message is cancelled gets SIGTERM within two
// heartbeats; the message stays cancelled and the worker goes on.
func TestCancelStopsARunningScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "cancel-run.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "c", "long").must(t)
	handler := writeScript(t, dir, "trap 'touch got-term; exit 143' TERM\ntouch started\nwhile :; do sleep 0.1; done\n")
	// A 3 s lease: heartbeats every second.
	work, stderr := startProcess(t, dir, "--db", db, "work", "--queue", "c", "--lease", "3s", "--", handler)
	exists := func(name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	}
	waitUntil(t, "the script's start", exists("started"))
	runBin(t, dir, "", "--db", db, "cancel", "--queue", "c", "1").must(t)
	// Two heartbeats are 2 s; the rest is room for a loaded machine.
	waitUntil(t, "the script's SIGTERM", exists("got-term"))
	if err := work.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := work.Wait(); err != nil {
		t.Fatalf("work after the cancel: %v\n%s", err, stderr)
	}
	list := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "c", "--json").must(t).stdout)
	if len(list) != 1 || list[0]["state"] != "cancelled" || list[0]["deliveries"] != 1.0 {
		t.Fatalf("after the cancel: %v, want the message cancelled after one delivery", list)
	}
}
