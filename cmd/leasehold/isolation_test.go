package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// secretEnv is a worker's environment with the secrets a script must not
// reach: the database's address and password, and the server's key.
func secretEnv(db string) []string {
	return append(os.Environ(), "LEASEHOLD_DB="+db, "PGPASSWORD=hunter2", "LEASEHOLD_SECRET_ACCESS_KEY=s3cr3tkey")
}

// probeScript records, in dir, who the script runs as and what it reads
// of the worker (its supervisor's parent) and of its supervisor.
const probeScript = `cat >/dev/null
out=%s
id -u > $out/uid
id -G > $out/groups
echo "$USER $LOGNAME $HOME" > $out/names
worker=$(cut -d' ' -f4 /proc/$PPID/stat)
echo $worker > $out/worker.pid
cat /proc/$worker/environ > $out/worker.environ 2>/dev/null; echo $? > $out/worker.environ.rc
cat /proc/$PPID/environ > $out/supervisor.environ 2>/dev/null; echo $? > $out/supervisor.environ.rc
tr '\0' ' ' < /proc/$worker/cmdline > $out/worker.cmdline 2>/dev/null
head -c 15 %s > $out/db.head 2>/dev/null; echo $? > $out/db.rc
`

type probe struct{ dir string }

func (p probe) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// publicDir is a directory that every user may enter and write, for a
// script running as another user.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "leasehold-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// throwawayUser creates a user with a group of its own and one
// supplementary group, removed when t ends. Only root can; the test is
// skipped otherwise.
func throwawayUser(t *testing.T) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a user to run scripts as needs root; run the test as root (CI does)")
	}
	suffix := strconv.Itoa(os.Getpid()%100000) + strings.ToLower(strconv.FormatInt(time.Now().UnixNano()%46656, 36))
	name, extra := "lhu"+suffix, "lhg"+suffix
	for _, c := range [][]string{{"groupadd", extra}, {"useradd", "-M", "-U", "-G", extra, "-s", "/usr/sbin/nologin", name}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("userdel", name).Run()
		_ = exec.Command("groupdel", extra).Run()
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func ids(t *testing.T, u *user.User) (uid, gid uint32) {
	t.Helper()
	a, err1 := strconv.ParseUint(u.Uid, 10, 32)
	b, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("user %s: uid %q gid %q", u.Username, u.Uid, u.Gid)
	}
	return uint32(a), uint32(b)
}

// sharedBin returns the built command, in a directory that other users
// may enter, so that they can run it.
func sharedBin(t *testing.T) string {
	t.Helper()
	bin := leaseholdBin(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runProbe enqueues one message on the SQLite file db and works it with
// the probe script, the worker started with extra arguments of work and
// as cred (nil: as this process). It returns what the script saw.
func runProbe(t *testing.T, db string, cred *syscall.Credential, workArgs ...string) probe {
	t.Helper()
	out := publicDir(t)
	scriptDir := publicDir(t)
	handler := filepath.Join(scriptDir, "probe.sh")
	if err := os.WriteFile(handler, []byte("#!/bin/sh\n"+fmt.Sprintf(probeScript, out, db)), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := sharedBin(t)
	for _, args := range [][]string{{"enqueue", "--queue", "probe", "x"},
		append(append([]string{"--log-level", "error", "work", "--queue", "probe", "--drain"}, workArgs...), "--", handler)} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = scriptDir
		cmd.Env = secretEnv(db)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		b, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("leasehold %v: %v\n%s", args, err, b)
		}
	}
	return probe{out}
}

// A script running as the worker's own user, not root, reads neither the
// worker's environment nor its supervisor's: both are non-dumpable. It
// reads what any process of that user reads: the worker's command line
// and the database file.
func TestSameUserScriptCannotReadWorkerEnvironment(t *testing.T) {
	t.Parallel()
	var cred *syscall.Credential
	dbDir := t.TempDir()
	if os.Geteuid() == 0 {
		// root reads every process's environment: the worker runs as a
		// user of its own here.
		u := throwawayUser(t)
		uid, gid := ids(t, u)
		cred = &syscall.Credential{Uid: uid, Gid: gid}
		dbDir = publicDir(t)
		if err := os.Chown(dbDir, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dbDir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dbDir, "same.db")
	p := runProbe(t, db, cred)
	if cred != nil && p.read(t, "uid") != strconv.Itoa(int(cred.Uid)) {
		t.Fatalf("the script ran as uid %s, want the worker's %d", p.read(t, "uid"), cred.Uid)
	}
	for _, f := range []string{"worker", "supervisor"} {
		if rc, env := p.read(t, f+".environ.rc"), p.read(t, f+".environ"); rc == "0" || strings.Contains(env, "hunter2") {
			t.Fatalf("a script of the worker's user read its %s's environment (cat exit %s): %q", f, rc, env)
		}
	}
	if !strings.Contains(p.read(t, "worker.cmdline"), "work --queue probe") {
		t.Fatalf("the worker's command line, readable by its user: %q", p.read(t, "worker.cmdline"))
	}
	if p.read(t, "db.rc") != "0" || p.read(t, "db.head") != "SQLite format 3" {
		t.Fatalf("a script of the worker's user reads the database file: exit %s, %q", p.read(t, "db.rc"), p.read(t, "db.head"))
	}
}

// With --user, a root worker's script runs as that user with its groups,
// and reaches neither the worker's environment nor its supervisor's nor
// the database. Without --user, the same script runs as root and reads
// them all: root passes every check.
func TestScriptRunsAsUser(t *testing.T) {
	t.Parallel()
	u := throwawayUser(t)
	uid, gid := ids(t, u)
	gids, err := u.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "user.db")
	p := runProbe(t, db, nil, "--user", u.Username)
	if got := p.read(t, "uid"); got != strconv.Itoa(int(uid)) {
		t.Fatalf("the script ran as uid %s, want %d", got, uid)
	}
	groups := strings.Fields(p.read(t, "groups"))
	if len(groups) != len(gids) || !strings.Contains(" "+p.read(t, "groups")+" ", " "+strconv.Itoa(int(gid))+" ") {
		t.Fatalf("the script's groups %v, want the user's %v", groups, gids)
	}
	for _, g := range groups {
		if g == "0" {
			t.Fatalf("the script kept root's group: %v", groups)
		}
	}
	if got, want := p.read(t, "names"), u.Username+" "+u.Username+" "+u.HomeDir; got != want {
		t.Fatalf("the script's USER LOGNAME HOME: %q, want %q", got, want)
	}
	for _, f := range []string{"worker", "supervisor"} {
		if rc, env := p.read(t, f+".environ.rc"), p.read(t, f+".environ"); rc == "0" || strings.Contains(env, "hunter2") {
			t.Fatalf("a --user script read its %s's environment (cat exit %s): %q", f, rc, env)
		}
	}
	if rc := p.read(t, "db.rc"); rc == "0" {
		t.Fatalf("a --user script read the worker's database file %s", db)
	}

	// The same script without --user runs as root.
	root := runProbe(t, filepath.Join(t.TempDir(), "root.db"), nil)
	if root.read(t, "uid") != "0" || !strings.Contains(root.read(t, "worker.environ"), "PGPASSWORD=hunter2") {
		t.Fatalf("a root worker's script without --user: uid %s, worker environment %q", root.read(t, "uid"), root.read(t, "worker.environ"))
	}
}

// --user needs a worker running as root, and a user that exists.
func TestUserNeedsRoot(t *testing.T) {
	t.Parallel()
	dir := publicDir(t)
	r := runBin(t, dir, "", "--db", filepath.Join(dir, "u.db"), "work", "--queue", "q", "--user", "no-such-user-here", "--", "true")
	want := "no such user"
	if os.Geteuid() != 0 {
		want = "needs a worker running as root"
	}
	if r.code != exitUsage || !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("--user of a missing user: exit %d, stderr %q; want exit %d saying %q", r.code, r.stderr, exitUsage, want)
	}
	if os.Geteuid() != 0 {
		return
	}
	u := throwawayUser(t)
	uid, gid := ids(t, u)
	cmd := exec.Command(sharedBin(t), "--db", filepath.Join(dir, "u.db"), "work", "--queue", "q", "--user", "root", "--", "true")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "LEASEHOLD_DB=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "needs a worker running as root") ||
		strings.Count(string(out), "\n") != 1 {
		t.Fatalf("--user from a worker that is not root: %v\n%s", err, out)
	}
	if exists(filepath.Join(dir, "u.db")) {
		t.Fatal("a refused --user created the database")
	}
}

// A script that kills its supervisor takes nothing with it: the worker
// kills what the script started, a daemon that left its session too, and
// fails the message with the reason; it is retried.
func TestScriptKillingItsSupervisor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "sup.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "sup", "--max-deliveries", "2", "x").must(t)
	handler := writeScript(t, dir, `cat >/dev/null
[ "$LEASEHOLD_ATTEMPT" = 1 ] || exit 0
sleep 1000 & echo $! > child.pid
setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' &
while [ ! -s daemon.pid ]; do sleep 0.01; done
echo $PPID > supervisor.pid
kill -9 $PPID
sleep 1000
`)
	r := runBin(t, dir, "", "--db", db, "work", "--queue", "sup", "--drain", "--", handler).must(t)
	for _, f := range []string{"supervisor.pid", "child.pid", "daemon.pid"} {
		pid := readPid(t, filepath.Join(dir, f))
		waitFor(t, 5*time.Second, f+" "+strconv.Itoa(pid)+" ending", func() bool { return !pidAlive(pid) })
	}
	m := byPayload(t, dir, db, "sup")["x"]
	if m["state"] != "completed" || m["deliveries"] != 2.0 {
		t.Fatalf("the message after its first run killed its supervisor: %v, want completed on the second delivery\n%s", m, r.stderr)
	}
	if le, _ := m["last_error"].(string); !strings.Contains(le, "supervising process ended without a report") {
		t.Fatalf("the first failure's reason: %q", le)
	}
}

// A script that stops its supervisor (SIGSTOP) cannot keep its message, or
// what it started, past the script's stop: once the maximum processing
// time has passed, the supervisor is killed after the grace it is given,
// and the worker kills what the script left.
func TestScriptStoppingItsSupervisor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "stop.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "stop", "--max-deliveries", "2", "x").must(t)
	handler := writeScript(t, dir, `cat >/dev/null
[ "$LEASEHOLD_ATTEMPT" = 1 ] || exit 0
setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' &
while [ ! -s daemon.pid ]; do sleep 0.01; done
echo $PPID > supervisor.pid
kill -STOP $PPID
`)
	r := runBin(t, dir, "", "--db", db, "work", "--queue", "stop", "--lease", "1s", "--max-processing", "1s", "--drain", "--", handler).must(t)
	for _, f := range []string{"supervisor.pid", "daemon.pid"} {
		pid := readPid(t, filepath.Join(dir, f))
		waitFor(t, 5*time.Second, f+" "+strconv.Itoa(pid)+" ending", func() bool { return !pidAlive(pid) })
	}
	if m := byPayload(t, dir, db, "stop")["x"]; m["state"] != "completed" || m["deliveries"] != 2.0 {
		t.Fatalf("the message after its first run stopped its supervisor: %v, want completed on the second delivery\n%s", m, r.stderr)
	}
}

// A script that stops the shared supervisor and is then stopped itself
// (cancelled here) has the supervisor killed after its grace; the script
// of another message, running beside it, dies with the supervisor through
// no fault of its own, and its message goes back without counting the
// delivery: it runs again, and completes on its first counted delivery.
func TestBystanderOfAKilledSupervisorKeepsItsDelivery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "by.db")
	// Ids 1 and 2, in a fresh database.
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "by", "stopper").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "by", "bystander").must(t)
	handler := writeScript(t, dir, `read -r what
if [ "$what" = bystander ]; then
	[ -e bystander.ran ] && exit 0
	touch bystander.ran
	exec sleep 300
fi
while [ ! -e bystander.ran ]; do sleep 0.01; done
echo $PPID > supervisor.pid
kill -STOP $PPID
exec sleep 300
`)
	work := exec.Command(leaseholdBin(t), "--db", db, "work", "--queue", "by", "--concurrency", "2", "--lease", "1s", "--max-processing", "60s", "--drain", "--", handler)
	work.Dir, work.Env = dir, append(os.Environ(), "LEASEHOLD_DB=")
	var stderr strings.Builder
	work.Stderr = &stderr
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- work.Wait() }()
	t.Cleanup(func() {
		_ = work.Process.Kill()
		<-exited
	})
	pidFile := filepath.Join(dir, "supervisor.pid")
	waitFor(t, 30*time.Second, "the supervisor stopped", func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	runBin(t, dir, "", "--db", db, "cancel", "--queue", "by", "1").must(t)
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("work: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("work did not drain the queue\n%s", stderr.String())
	}
	if sup := readPid(t, pidFile); pidAlive(sup) {
		t.Fatalf("the stopped supervisor %d is alive", sup)
	}
	m := byPayload(t, dir, db, "by")
	if m["stopper"]["state"] != "cancelled" {
		t.Fatalf("the stopper: %v, want cancelled", m["stopper"])
	}
	if b := m["bystander"]; b["state"] != "completed" || b["deliveries"] != 1.0 {
		t.Fatalf("the bystander: %v, want completed with one delivery counted\n%s", b, stderr.String())
	}
}
