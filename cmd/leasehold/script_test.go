package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/internal/worker"
)

// waitFor polls a real process's side effect until cond holds, failing
// the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, limit)
		}
		time.Sleep(10 * time.Millisecond) // polling a real process's side effect
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// byPayload lists a queue and indexes its messages by payload.
func byPayload(t *testing.T, dir, db, queue string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, m := range jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", queue, "--json").must(t).stdout) {
		out[m["payload"].(string)] = m
	}
	return out
}

func TestReplyOutputIsCappedInMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "big.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "big", "--reply-to", "answers", "flood").must(t)
	handler := writeScript(t, dir, "cat >/dev/null; head -c 100000000 /dev/zero\n")
	cmd := exec.Command(leaseholdBin(t), "--db", db, "--log-level", "error", "work", "--queue", "big", "--", handler)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "LEASEHOLD_DB=")
	stderr := &testproc.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	want := fmt.Sprintf("reply over %d bytes", worker.MaxReplyOutput)
	var m map[string]any
	waitFor(t, time.Minute, "the request dead-lettered", func() bool {
		m = byPayload(t, dir, db, "big")["flood"]
		return m["state"] == "dead"
	})
	// The worker's own high-water mark: the resource usage wait reports
	// would include the memory of the test process that started it.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var hwm int
	for _, l := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	t.Logf("the worker's peak RSS: %d KiB", hwm)
	if hwm == 0 || hwm >= 64<<10 {
		t.Fatalf("a script printing 100 MB as its reply made the worker's RSS reach %d KiB, want under 64 MiB\n%s", hwm, stderr)
	}
	if m["dead_reason"] != "permanent_error" || !strings.Contains(m["last_error"].(string), want) {
		t.Fatalf("the request: %v, want dead with %q", m, want)
	}
	replies := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "answers", "--json").must(t).stdout)
	if len(replies) != 1 || !strings.Contains(replies[0]["payload"].(string), want) {
		t.Fatalf("replies %v, want one that says %q", replies, want)
	}
}

func TestReplyLimitIsTheDocumentedOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "limit.db")
	for _, n := range []int{worker.MaxReplyOutput, worker.MaxReplyOutput + 1} {
		runBin(t, dir, "", "--db", db, "enqueue", "--queue", "limit", "--reply-to", "answers", strconv.Itoa(n)).must(t)
	}
	handler := writeScript(t, dir, `head -c "$(cat)" /dev/zero`+"\n")
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "limit", "--drain", "--", handler).must(t)
	msgs := byPayload(t, dir, db, "limit")
	if m := msgs[strconv.Itoa(worker.MaxReplyOutput)]; m["state"] != "completed" {
		t.Fatalf("a reply of exactly the limit: %v", m)
	}
	if m := msgs[strconv.Itoa(worker.MaxReplyOutput+1)]; m["state"] != "dead" ||
		!strings.Contains(m["last_error"].(string), fmt.Sprintf("reply over %d bytes", worker.MaxReplyOutput)) {
		t.Fatalf("a reply one byte over the limit: %v", m)
	}
	var sizes []int
	for _, r := range jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "answers", "--json").must(t).stdout) {
		rep, err := worker.DecodeReply([]byte(r["payload"].(string)))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(rep.Output))
	}
	slices.Sort(sizes)
	if len(sizes) != 2 || sizes[0] != 0 || sizes[1] != worker.MaxReplyOutput {
		t.Fatalf("reply outputs of %v bytes, want %d and an error reply", sizes, worker.MaxReplyOutput)
	}
	help := runBin(t, dir, "", "work", "--help").must(t).stdout
	if !strings.Contains(help, strconv.Itoa(worker.MaxReplyOutput)+" bytes") {
		t.Fatalf("work --help does not state the reply limit of %d bytes:\n%s", worker.MaxReplyOutput, help)
	}
}

// pidAlive reports whether pid runs: it exists and is not a zombie
// waiting to be reaped.
func pidAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", file, err)
	}
	return pid
}

func TestScriptsDieWithTheirWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "kill.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "sig", "long").must(t)
	// The script, a child in its process group, and a daemon that left
	// both its group and its session.
	work, stderr := startWork(t, dir, db, `
sleep 300 & echo $! > child.pid
setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' &
echo $$ > script.pid
while [ ! -s daemon.pid ]; do sleep 0.01; done
touch started
wait
`)
	pids := map[string]int{}
	for _, f := range []string{"script.pid", "child.pid", "daemon.pid"} {
		pids[f] = readPid(t, filepath.Join(dir, f))
		if !pidAlive(pids[f]) {
			t.Fatalf("%s: %d is not running before the kill", f, pids[f])
		}
	}
	if err := work.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, 2*time.Second, "every process of the killed worker's script ending", func() bool {
		for _, pid := range pids {
			if pidAlive(pid) {
				return false
			}
		}
		return true
	})
	t.Logf("the script's processes were gone %s after kill -9\n%s", time.Since(killed).Round(time.Millisecond), stderr)
}

func TestDaemonHoldingOutputDoesNotPinMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "daemon.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "d", "one").must(t)
	handler := writeScript(t, dir, "setsid sh -c 'echo $$ > daemon.pid; exec sleep 45' &\nwhile [ ! -s daemon.pid ]; do sleep 0.01; done\nexit 0\n")
	began := time.Now()
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "d", "--drain", "--", handler).must(t)
	// The daemon would have held the script's output for 45 s.
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("work --drain took %s: the daemon's hold on the script's output kept the message", took)
	}
	if m := byPayload(t, dir, db, "d")["one"]; m["state"] != "completed" {
		t.Fatalf("the script exited 0: %v", m)
	}
	if pid := readPid(t, filepath.Join(dir, "daemon.pid")); pidAlive(pid) {
		t.Fatalf("the daemon %d outlived its message", pid)
	}
}

func TestScriptEnvironmentHasNoSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "env.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "env", "x").must(t)
	handler := writeScript(t, dir, "env > env.txt\ngrep SigIgn /proc/$$/status > sigign.txt\n")
	cmd := exec.Command(leaseholdBin(t), "--log-level", "error", "work", "--queue", "env", "--drain", "--", handler)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LEASEHOLD_DB="+db, "PGPASSWORD=hunter2", "LEASEHOLD_SECRET_ACCESS_KEY=k", "KEEP_ME=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("work: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, leak := range []string{"LEASEHOLD_DB=", "PGPASSWORD=", "hunter2", "LEASEHOLD_SECRET_ACCESS_KEY="} {
		if strings.Contains(env, leak) {
			t.Fatalf("the script's environment holds %q:\n%s", leak, env)
		}
	}
	// The worker ignores SIGPIPE for itself, and catches SIGINT; a script
	// gets both signals' defaults.
	ign, err := os.ReadFile(filepath.Join(dir, "sigign.txt"))
	if err != nil {
		t.Fatal(err)
	}
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(string(ign), "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if bits := uint64(1)<<(syscall.SIGPIPE-1) | 1<<(syscall.SIGINT-1); mask&bits != 0 {
		t.Fatalf("the script ignores SIGPIPE or SIGINT: SigIgn %#x", mask)
	}
	for _, want := range []string{"KEEP_ME=1", "LEASEHOLD_RUN=", "LEASEHOLD_MESSAGE_ID=", "LEASEHOLD_QUEUE=env", "LEASEHOLD_ATTEMPT=1", "LEASEHOLD_FENCING_TOKEN="} {
		if !strings.Contains(env, want) {
			t.Fatalf("the script's environment lacks %q:\n%s", want, env)
		}
	}
}

func TestBrokenCommandDeadLettersNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		// breakIt, when set, breaks the command after the worker checked it
		// at start, as a deploy would.
		breakIt func(path string) error
	}{
		{name: "bad interpreter", body: "#!/nonexistent/interpreter\n"},
		{name: "permission denied", body: "#!/bin/sh\n", breakIt: func(p string) error { return os.Chmod(p, 0o644) }},
		{name: "missing file", body: "#!/bin/sh\n", breakIt: os.Remove},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := "sqlite:" + filepath.Join(dir, "broken.db")
			runBin(t, dir, "", "--db", db, "migrate").must(t)
			handler := filepath.Join(dir, "handler")
			if err := os.WriteFile(handler, []byte(tc.body), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(leaseholdBin(t), "--db", db, "work", "--queue", "b", "--concurrency", "4", "--", handler)
			cmd.Dir, cmd.Env = dir, append(os.Environ(), "LEASEHOLD_DB=")
			stderr := &testproc.SyncBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the worker starting", func() bool { return strings.Contains(stderr.String(), "worker started") })
			if tc.breakIt != nil {
				if err := tc.breakIt(handler); err != nil {
					t.Fatal(err)
				}
			}
			var in strings.Builder
			for i := range 20 {
				fmt.Fprintf(&in, "m%d\n", i)
			}
			runBin(t, dir, in.String(), "--db", db, "enqueue", "--queue", "b", "--max-deliveries", "1").must(t)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var err error
			select {
			case err = <-exited:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("work went on with a command that cannot start\n%s", stderr)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("work with a command that cannot start: %v, want exit status 1\n%s", err, stderr)
			}
			if !strings.Contains(stderr.String(), "leasehold: start "+handler) {
				t.Fatalf("stderr does not end naming the failed start:\n%s", stderr)
			}
			for p, m := range byPayload(t, dir, db, "b") {
				if m["state"] != "pending" || m["deliveries"] != 0.0 {
					t.Fatalf("message %s after failed starts: %v, want pending with no delivery used", p, m)
				}
			}
		})
	}
}

// Lines of concurrent scripts reach the worker's output whole, each
// written in several pieces by its script.
func TestConcurrentOutputLinesStayWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "lines.db")
	runBin(t, dir, "1\n2\n3\n4\n5\n6\n7\n8\n", "--db", db, "enqueue", "--queue", "lines").must(t)
	a, b := strings.Repeat("a", 300), strings.Repeat("b", 300)
	handler := writeScript(t, dir, fmt.Sprintf(`id=$(cat)
i=0
while [ $i -lt 300 ]; do printf '%%s-%s' "$id"; printf '%s\n'; i=$((i+1)); done
printf 'unfinished-%%s' "$id"
`, a, b))
	cmd := exec.Command(leaseholdBin(t), "--db", db, "--log-level", "error", "work", "--queue", "lines", "--concurrency", "8", "--drain", "--", handler)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "LEASEHOLD_DB=")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("work: %v", err)
	}
	line := regexp.MustCompile(`^([1-8])-` + a + b + `$|^unfinished-[1-8]$`)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*301 {
		t.Fatalf("%d lines, want %d", len(lines), 8*301)
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Fatalf("a line mixed or cut: %.80q", l)
		}
	}
}

// One supervisor forks the scripts of every message, and ends with its
// worker.
func TestOneSupervisorServesEveryScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "one.db")
	runBin(t, dir, "1\n2\n3\n4\n5\n6\n", "--db", db, "enqueue", "--queue", "one").must(t)
	handler := writeScript(t, dir, "echo $PPID > sup.$(cat)\n")
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "one", "--concurrency", "2", "--drain", "--", handler).must(t)
	sups := map[int]bool{}
	for i := 1; i <= 6; i++ {
		sups[readPid(t, filepath.Join(dir, "sup."+strconv.Itoa(i)))] = true
	}
	if len(sups) != 1 {
		t.Fatalf("six scripts had %d supervisors, want one: %v", len(sups), sups)
	}
	for pid := range sups {
		if pidAlive(pid) {
			t.Fatalf("the supervisor %d outlived its worker", pid)
		}
	}
}

// A script that kills the supervisor takes down every script running
// beside it: the worker kills what each started and fails each message,
// and a new supervisor runs their next deliveries.
func TestScriptKillingTheSharedSupervisor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "shared.db")
	runBin(t, dir, "victim\nkiller\n", "--db", db, "enqueue", "--queue", "shared", "--max-deliveries", "2").must(t)
	handler := writeScript(t, dir, `p=$(cat)
[ "$LEASEHOLD_ATTEMPT" = 1 ] || exit 0
case $p in
victim) setsid sh -c 'echo $$ > victim.daemon; exec sleep 1000' &
	while [ ! -s victim.daemon ]; do sleep 0.01; done
	echo $$ > victim.pid
	sleep 1000 ;;
killer) while [ ! -s victim.pid ]; do sleep 0.01; done
	echo $PPID > supervisor.pid
	kill -9 $PPID
	sleep 1000 ;;
esac
`)
	r := runBin(t, dir, "", "--db", db, "work", "--queue", "shared", "--concurrency", "2", "--drain", "--", handler).must(t)
	for _, f := range []string{"supervisor.pid", "victim.pid", "victim.daemon"} {
		pid := readPid(t, filepath.Join(dir, f))
		waitFor(t, 5*time.Second, f+" "+strconv.Itoa(pid)+" ending", func() bool { return !pidAlive(pid) })
	}
	for p, m := range byPayload(t, dir, db, "shared") {
		if m["state"] != "completed" || m["deliveries"] != 2.0 {
			t.Fatalf("%s after its first run lost the supervisor: %v, want completed on the second delivery\n%s", p, m, r.stderr)
		}
		if le, _ := m["last_error"].(string); !strings.Contains(le, "supervising process ended without a report") {
			t.Fatalf("%s's first failure: %q", p, le)
		}
	}
}
