package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasehold/leasehold/internal/testproc"
)

// Of two workers on one database, one maintains it. Frozen by SIGSTOP, it
// loses the lease to the other; thawed, it finds that it lost it before it
// does any upkeep, and says so.
func TestFrozenMaintainerHandsOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "maint.db")
	runBin(t, dir, "", "--db", db, "migrate").must(t)
	handler := writeScript(t, dir, "exit 0\n")
	start := func() (*exec.Cmd, *testproc.SyncBuffer) {
		// A 3 s lease: the maintainer lease is renewed every second.
		return startProcess(t, dir, "--db", db, "work", "--queue", "m", "--lease", "3s", "--", handler)
	}
	waitLog := func(name string, out *testproc.SyncBuffer, line string) {
		t.Helper()
		waitUntil(t, name+" logging "+line, func() bool { return strings.Contains(out.String(), line) })
	}
	const maintains, lost = "this process maintains the database", "no longer the database's maintainer"
	a, aLog := start()
	waitLog("the first worker", aLog, maintains)
	b, bLog := start()
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitLog("the second worker, with the first frozen", bLog, maintains)
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitLog("the first worker, thawed", aLog, lost)
	if strings.Count(aLog.String(), maintains) != 1 {
		t.Fatalf("the thawed worker took the lease back:\n%s", aLog)
	}
	for _, p := range []*exec.Cmd{a, b} {
		if err := p.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatalf("a worker after SIGTERM: %v", err)
		}
	}
}
