package script

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary stands in for leasehold: as the supervisor, and as a
// process that leaves its process group (for the shell, which has no job
// control without a terminal).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case SuperviseArg:
			os.Exit(Supervise(os.Args[2:]))
		case leaveGroupArg:
			_ = syscall.Setpgid(0, 0)
			if err := os.WriteFile(os.Args[2], []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
				os.Exit(1)
			}
			time.Sleep(time.Hour) // killed by the test's supervisor
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

const leaveGroupArg = "__test_leave_group"

// testSupervisor starts a supervisor whose script runs $BODY in $DIR, and
// returns a function that starts a run with body.
func testSupervisor(t *testing.T) (dir string, run func(body string) (uint64, <-chan runEnd), sup *supervisorConn) {
	t.Helper()
	dir = t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sup, err = startSupervisor([]string{"/bin/sh", "-c", `cd "$DIR" && eval "$BODY"`}, nil, workerEnv(os.Environ()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sup.close)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	out, err := os.Create(filepath.Join(dir, "output"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return dir, func(body string) (uint64, <-chan runEnd) {
		t.Helper()
		id, ch, err := sup.start([]string{"DIR=" + dir, "BODY=" + body, "HELPER=" + self}, [3]*os.File{null, out, out})
		if err != nil {
			t.Fatal(err)
		}
		return id, ch
	}, sup
}

// await is a run's end, which must be a report.
func await(t *testing.T, dir string, ch <-chan runEnd) scriptEnded {
	t.Helper()
	select {
	case end := <-ch:
		if !end.ok {
			t.Fatalf("no report: %v", end.waitErr)
		}
		return end.ended
	case <-time.After(time.Minute):
	}
	out, _ := os.ReadFile(filepath.Join(dir, "output"))
	t.Fatalf("no end within a minute; the scripts' output:\n%s", out)
	return scriptEnded{}
}

// pidIn waits for a script to write the pid file name in dir.
func pidIn(t *testing.T, dir, name string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", name)
		}
		time.Sleep(10 * time.Millisecond) // polling a real process's side effect
	}
}

// running reports whether pid runs: it exists and is not a zombie.
func running(pid int) bool {
	f, ok := statFields(pid)
	return ok && len(f) > 0 && f[0] != "Z"
}

// One supervisor runs scripts side by side and ties each orphan to its
// own run: a daemon that left the session by the marker it inherited, a
// process that left the group and dropped the marker by its session. Both
// die before their run is reported, while the other run's daemon lives on.
// An orphan tied to nothing (new session, no marker) lives until every run
// that was going when it was found has ended.
func TestSupervisorTiesOrphansToTheirRun(t *testing.T) {
	dir, run, _ := testSupervisor(t)
	_, b := run(`setsid sh -c 'echo $$ > b.daemon; exec sleep 300' &
while [ ! -e b.go ]; do sleep 0.01; done`)
	bDaemon := pidIn(t, dir, "b.daemon")
	_, a := run(`setsid sh -c 'echo $$ > a.daemon; exec sleep 300' &
env -i "$HELPER" ` + leaveGroupArg + ` a.group &
env -i setsid sh -c 'echo $$ > a.stray; exec sleep 300' &
while [ ! -s a.daemon ] || [ ! -s a.group ] || [ ! -s a.stray ]; do sleep 0.01; done
exit 3`)
	if got := await(t, dir, a); !got.status.Exited() || got.status.ExitStatus() != 3 {
		t.Fatalf("run a ended with %s, want exit status 3", got)
	}
	for _, f := range []string{"a.daemon", "a.group"} {
		if pid := pidIn(t, dir, f); running(pid) {
			t.Fatalf("%s (%d) outlived its run's report", f, pid)
		}
	}
	stray := pidIn(t, dir, "a.stray")
	if sid, _ := sessionOf(stray); sid != stray {
		t.Fatalf("the stray %d is in session %d, not its own", stray, sid)
	}
	if !running(bDaemon) || !running(stray) {
		t.Fatalf("run a's end killed run b's daemon (running %v) or the stray (running %v), which b may own", running(bDaemon), running(stray))
	}
	if err := os.WriteFile(filepath.Join(dir, "b.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := await(t, dir, b); !got.status.Exited() || got.status.ExitStatus() != 0 {
		t.Fatalf("run b ended with %s", got)
	}
	if running(bDaemon) {
		t.Fatalf("run b's daemon %d outlived its run's report", bDaemon)
	}
	deadline := time.Now().Add(10 * time.Second)
	for running(stray) {
		if time.Now().After(deadline) {
			t.Fatalf("the stray %d outlived every run that was going when it was found", stray)
		}
		time.Sleep(10 * time.Millisecond) // killed right after b's report
	}
}

// Asked to kill a run, the supervisor kills its script and everything it
// started, and reports the run once they are gone; a script that cannot
// start is reported as such.
func TestSupervisorKillsARunAndReportsFailedStarts(t *testing.T) {
	dir, run, sup := testSupervisor(t)
	id, ch := run(`setsid sh -c 'echo $$ > daemon; exec sleep 300' &
echo $$ > script
sleep 300`)
	daemon, script := pidIn(t, dir, "daemon"), pidIn(t, dir, "script")
	sup.signal("kill", id)
	if got := await(t, dir, ch); !got.status.Signaled() || got.status.Signal() != syscall.SIGKILL {
		t.Fatalf("the killed run ended with %s", got)
	}
	if running(daemon) || running(script) {
		t.Fatalf("after the killed run's report, the script (%v) or its daemon (%v) runs", running(script), running(daemon))
	}

	broken, err := startSupervisor([]string{filepath.Join(dir, "missing")}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer broken.close()
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	_, ch, err = broken.start(nil, [3]*os.File{null, null, null})
	if err != nil {
		t.Fatal(err)
	}
	if got := await(t, dir, ch); !strings.Contains(got.startErr, "no such file") {
		t.Fatalf("a missing command's run: %+v, want a failed start", got)
	}
}

// A supervisor that ends with runs going tells each that no report comes.
func TestSupervisorDeathEndsEveryRun(t *testing.T) {
	dir, run, sup := testSupervisor(t)
	_, a := run(`echo $$ > a; sleep 300`)
	_, b := run(`echo $$ > b; sleep 300`)
	pids := []int{pidIn(t, dir, "a"), pidIn(t, dir, "b")}
	sup.kill()
	for _, ch := range []<-chan runEnd{a, b} {
		if end := <-ch; end.ok {
			t.Fatalf("a run of a killed supervisor reported %s", end.ended)
		}
	}
	if _, _, err := sup.start(nil, [3]*os.File{}); err != errSupervisorGone {
		t.Fatalf("a start on a dead supervisor: %v", err)
	}
	for _, pid := range pids {
		deadline := time.Now().Add(10 * time.Second)
		for running(pid) { // the parent-death signal's SIGKILL
			if time.Now().After(deadline) {
				t.Fatalf("script %d outlived its supervisor", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
