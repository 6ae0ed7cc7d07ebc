package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
		cmd := exec.Command(bin, "--db", db, "work", "--queue", "m", "--lease", "3s", "--", handler)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "LEASEHOLD_DB=")
		stderr := &testproc.SyncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd, stderr
	}
	waitLog := func(name string, out *testproc.SyncBuffer, line string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), line) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not log %q within 30 s:\n%s", name, line, out)
			}
			time.Sleep(20 * time.Millisecond) // polling a real process's output
		}
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
