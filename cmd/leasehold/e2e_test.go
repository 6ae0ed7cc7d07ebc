package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
)

// binDir holds the leasehold binary these tests run, built by the first
// test that asks for it: under -short, none does.
var binDir string

var buildBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "leasehold")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build leasehold: %v\n%s", err, out)
	}
	return bin, nil
})

// leaseholdBin returns the built command. A test that runs it is a process
// test, so under -short it skips t instead.
func leaseholdBin(t testing.TB) string {
	t.Helper()
	testproc.SkipShort(t, "runs the leasehold command as a process")
	bin, err := buildBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leasehold-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// runBin runs the binary with args in dir, stdin as its input.
func runBin(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	return runBinEnv(t, dir, stdin, nil, args...)
}

// runBinEnv runs the binary as runBin does, with env added to its
// environment.
func runBinEnv(t *testing.T, dir, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, leaseholdBin(t), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "LEASEHOLD_DB=", "LEASEHOLD_SCHEMA="), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("run leasehold %v: %v", args, err)
	}
	return r
}

func (r result) must(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

// jsonLines decodes one JSON object per line.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 8<<20) // a line holds a payload of up to 1 MiB, escaped
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read JSON lines: %v", err)
	}
	return out
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"malformed postgres url", []string{"--db", "postgres://a:b@host:notaport/db", "stats"}, "malformed PostgreSQL URL"},
		{"unknown database kind", []string{"--db", "mysql://localhost/x", "stats"}, `unknown database kind "mysql"`},
		{"empty sqlite path", []string{"--db", "sqlite:", "stats"}, "needs a file path"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"no command", nil, "missing command"},
		{"unknown flag", []string{"stats", "--colour"}, "unknown flag: --colour"},
		{"missing flag value", []string{"enqueue", "--queue"}, "flag needs an argument"},
		{"missing queue", []string{"enqueue", "x"}, "--queue is required"},
		{"bad duration", []string{"work", "--queue", "q", "--lease", "soon", "--", "true"}, `invalid argument "soon"`},
		{"negative delay", []string{"enqueue", "--queue", "q", "--delay", "-1s", "x"}, "--delay -1s"},
		{"heartbeat above a third", []string{"work", "--queue", "q", "--lease", "30s", "--heartbeat", "11s", "--", "true"}, "--heartbeat 11s"},
		{"no command after dash", []string{"work", "--queue", "q", "--"}, "missing command after --"},
		{"no dash", []string{"work", "--queue", "q"}, "missing command after --"},
		{"reap interval not below lease", []string{"work", "--queue", "q", "--lease", "5s", "--reap-interval", "5s", "--", "true"}, "--reap-interval 5s"},
		{"bad state", []string{"list", "--queue", "q", "--state", "lost"}, `unknown state "lost"`},
		{"bad log level", []string{"--log-level", "loud", "stats"}, "--log-level"},
		{"bad log format", []string{"--log-format", "xml", "stats"}, "--log-format"},
		{"dead without subcommand", []string{"dead"}, "missing subcommand"},
		{"dead unknown subcommand", []string{"dead", "bury"}, `unknown command "bury"`},
		{"two payloads", []string{"enqueue", "--queue", "q", "a", "b"}, "at most 1 argument"},
		{"memory store outside bench", []string{"--db", "memory:", "enqueue", "--queue", "q", "x"}, "for bench only"},
		{"explicit zero max processing", []string{"work", "--queue", "q", "--max-processing", "0", "--", "true"}, "--max-processing 0"},
		{"max processing below the lease", []string{"work", "--queue", "q", "--lease", "10s", "--max-processing", "5s", "--", "true"}, "--max-processing 5s: must be at least --lease 10s"},
		{"huge lease", []string{"work", "--queue", "q", "--lease", "1000000h", "--", "true"}, "--lease 1000000h"},
		{"lease too short to keep", []string{"work", "--queue", "q", "--lease", "1ms", "--", "true"}, "--lease 1ms: must be 1s to"},
		{"zero max deliveries", []string{"enqueue", "--queue", "q", "--max-deliveries", "0", "x"}, "--max-deliveries 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := tc.args
			if len(args) == 0 || args[0] != "--db" {
				args = append([]string{"--db", "usage.db"}, args...)
			}
			r := runBin(t, dir, "", args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\nstderr: %s", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("stderr %q: want one line containing %q", r.stderr, tc.want)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Fatalf("a usage error wrote %s", entries[0].Name())
			}
		})
	}
}

func TestUsageErrorWritesNoDefaultDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runBin(t, dir, "", "enqueue", "--queue", "q", "--delay", "-1s", "x"); r.code != 2 {
		t.Fatalf("exit %d, want 2", r.code)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a usage error wrote %s", left[0].Name())
	}
}

func TestUnreachableServerIsRuntimeError(t *testing.T) {
	t.Parallel()
	r := runBin(t, t.TempDir(), "", "--db", "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", "stats")
	if r.code != 1 || !strings.Contains(r.stderr, "leasehold:") {
		t.Fatalf("exit %d, stderr %q; want status 1 with a message", r.code, r.stderr)
	}
}

// writeScript writes a shell script into dir and returns its path.
func writeScript(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "handler.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// testEnqueueWorkStats runs the main flow against the database db.
func testEnqueueWorkStats(t *testing.T, db string) {
	dir := t.TempDir()
	handler := writeScript(t, dir, `
payload=$(cat)
echo "$LEASEHOLD_MESSAGE_ID|$LEASEHOLD_QUEUE|$LEASEHOLD_KEY|$LEASEHOLD_ATTEMPT|$LEASEHOLD_FENCING_TOKEN|$payload" >> "$OUT"
`)
	ids := strings.Fields(runBin(t, dir, "one\ntwo\nthree\n", "--db", db, "enqueue", "--queue", "e2e", "--key", "k").must(t).stdout)
	if len(ids) != 3 {
		t.Fatalf("enqueue printed %v, want 3 ids", ids)
	}
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "e2e", "four").must(t)
	out := filepath.Join(dir, "out.txt")
	work := exec.Command(leaseholdBin(t), "--db", db, "work", "--queue", "e2e", "--concurrency", "2", "--drain", "--", handler)
	work.Dir, work.Env = dir, append(os.Environ(), "OUT="+out, "LEASEHOLD_DB=")
	if b, err := work.CombinedOutput(); err != nil {
		t.Fatalf("work --drain: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 4 {
		t.Fatalf("handler ran %d times: %q", len(lines), got)
	}
	// Keyed messages ran in order; every variable was set.
	var keyed []string
	for _, l := range lines {
		f := strings.Split(l, "|")
		if len(f) != 6 || f[1] != "e2e" || f[3] != "1" || f[4] == "" || f[4] == "0" {
			t.Fatalf("handler line %q: queue, attempt or token wrong", l)
		}
		if f[2] == "k" {
			keyed = append(keyed, f[0]+" "+f[5])
		}
	}
	want := []string{ids[0] + " one", ids[1] + " two", ids[2] + " three"}
	if strings.Join(keyed, ",") != strings.Join(want, ",") {
		t.Fatalf("keyed order %v, want %v", keyed, want)
	}
	stats := jsonLines(t, runBin(t, dir, "", "--db", db, "stats", "--json").must(t).stdout)
	if len(stats) != 1 || stats[0]["queue"] != "e2e" || stats[0]["completed"] != 4.0 || stats[0]["pending"] != 0.0 ||
		stats[0]["processing"] != 0.0 || stats[0]["dead"] != 0.0 {
		t.Fatalf("stats %v", stats)
	}
	list := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "e2e", "--state", "completed", "--json").must(t).stdout)
	if len(list) != 4 {
		t.Fatalf("list %v", list)
	}
	for _, m := range list {
		if m["fencing_token"].(float64) <= 0 || m["deliveries"] != 1.0 || m["state"] != "completed" {
			t.Fatalf("listed message %v", m)
		}
	}
}

func TestEnqueueWorkStatsSQLite(t *testing.T) {
	t.Parallel()
	testEnqueueWorkStats(t, "sqlite:"+filepath.Join(t.TempDir(), "e2e.db"))
}

func TestEnqueueWorkStatsPostgres(t *testing.T) {
	t.Parallel()
	db := freshDatabase(t)
	if r := runBin(t, t.TempDir(), "", "--db", db, "stats"); r.code != 1 || !strings.Contains(r.stderr, "migrate") {
		t.Fatalf("stats before migrate: exit %d, stderr %q; want status 1 naming migrate", r.code, r.stderr)
	}
	runBin(t, t.TempDir(), "", "--db", db, "migrate").must(t)
	testEnqueueWorkStats(t, db)
}

// An application that keeps leasehold's tables in a schema of its own
// names it with --schema or LEASEHOLD_SCHEMA, and every command sees its
// queues there; a schema on SQLite, or a malformed one, is refused.
func TestSchemaFlag(t *testing.T) {
	t.Parallel()
	db := freshDatabase(t)
	dir := t.TempDir()
	ctx := context.Background()
	if out := runBin(t, dir, "", "--db", db, "--schema", "app_jobs", "migrate").must(t).stdout; !strings.Contains(out, "app_jobs") {
		t.Fatalf("migrate --schema app_jobs said %q", out)
	}
	st, err := postgres.Open(ctx, postgres.Config{DSN: db, Schema: "app_jobs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "orders", Payload: []byte("from the app")}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	runBin(t, dir, "", "--db", db, "--schema", "app_jobs", "enqueue", "--queue", "orders", "from the CLI").must(t)
	stats := runBinEnv(t, dir, "", []string{"LEASEHOLD_SCHEMA=app_jobs"}, "--db", db, "stats", "--queue", "orders", "--json").must(t).stdout
	if !strings.Contains(stats, `"pending":2`) {
		t.Fatalf("stats of the app's schema: %s, want 2 pending", stats)
	}
	if r := runBin(t, dir, "", "--db", db, "stats"); r.code != 1 || !strings.Contains(r.stderr, "migrate") {
		t.Fatalf("stats of the default schema, never migrated: exit %d, stderr %q; want status 1 naming migrate", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"--db", db, "--schema", "App-Jobs", "stats"},
		{"--db", filepath.Join(dir, "app.db"), "--schema", "app_jobs", "stats"},
	} {
		r := runBin(t, dir, "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--schema") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Fatalf("leasehold %q: exit %d, stderr %q; want status 2 and one line naming --schema", args, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "app.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused command made the SQLite file: %v", err)
	}
}

// freshDatabase creates an empty PostgreSQL database for one test and
// returns its URL.
func freshDatabase(t *testing.T) string {
	t.Helper()
	base := pgtest.DSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("reach PostgreSQL named by LEASEHOLD_TEST_POSTGRES_DSN: %v", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "leasehold_cli_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func TestExitCodeContract(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "codes.db")
	handler := writeScript(t, dir, `
case "$(cat)" in
ok) exit 0 ;;
bad) echo "cannot parse" >&2; exit 65 ;;
*) echo "boom on attempt $LEASEHOLD_ATTEMPT" >&2; exit 3 ;;
esac
`)
	for _, p := range []string{"ok", "bad", "flaky"} {
		runBin(t, dir, "", "--db", db, "enqueue", "--queue", "codes", "--max-deliveries", "2", p).must(t)
	}
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "codes", "--drain", "--", handler).must(t)
	byPayload := map[string]map[string]any{}
	for _, m := range jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "codes", "--json").must(t).stdout) {
		byPayload[m["payload"].(string)] = m
	}
	if m := byPayload["ok"]; m["state"] != "completed" {
		t.Fatalf("exit 0: %v", m)
	}
	if m := byPayload["bad"]; m["state"] != "dead" || m["dead_reason"] != "permanent_error" || m["deliveries"] != 1.0 ||
		!strings.Contains(m["last_error"].(string), "cannot parse") {
		t.Fatalf("exit 65: %v", m)
	}
	if m := byPayload["flaky"]; m["state"] != "dead" || m["dead_reason"] != "max_deliveries" || m["deliveries"] != 2.0 ||
		!strings.Contains(m["last_error"].(string), "boom on attempt 2") {
		t.Fatalf("exit 3: %v", m)
	}
	dead := runBin(t, dir, "", "--db", db, "dead", "list", "--queue", "codes").must(t).stdout
	if !strings.Contains(dead, "permanent_error") || !strings.Contains(dead, "max_deliveries") {
		t.Fatalf("dead list:\n%s", dead)
	}
	if out := runBin(t, dir, "", "--db", db, "dead", "redrive", "--queue", "codes").must(t).stdout; strings.TrimSpace(out) != "redrove 2" {
		t.Fatalf("redrive: %q", out)
	}
	if out := runBin(t, dir, "", "--db", db, "dead", "purge", "--queue", "codes", "--all").must(t).stdout; strings.TrimSpace(out) != "purged 0" {
		t.Fatalf("purge after redrive: %q", out)
	}
}

// startWork starts `leasehold work` and waits until its handler has begun
// a message, which the script reports by creating the file started.
func startWork(t *testing.T, dir, db string, body string) (*exec.Cmd, *testproc.SyncBuffer) {
	t.Helper()
	handler := writeScript(t, dir, body)
	cmd := exec.Command(leaseholdBin(t), "--db", db, "work", "--queue", "sig", "--shutdown-timeout", "20s", "--", handler)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "LEASEHOLD_DB=")
	// A process group of its own, as under a supervisor that signals
	// process and group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &testproc.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	started := filepath.Join(dir, "started")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			return cmd, stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the handler did not start\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a real process's side effect
	}
}

func TestSIGTERMFinishesInFlightWork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "sig.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "sig", "slow").must(t)
	cmd, stderr := startWork(t, dir, db, "touch started; sleep 1; cat > /dev/null\n")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("work after SIGTERM: %v, want exit 0\n%s", err, stderr)
	}
	stats := jsonLines(t, runBin(t, dir, "", "--db", db, "stats", "--json", "--queue", "sig").must(t).stdout)
	if stats[0]["completed"] != 1.0 {
		t.Fatalf("stats after a graceful stop: %v", stats)
	}
}

func TestSecondSignalReleasesLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "sig2.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "sig", "stuck").must(t)
	cmd, stderr := startWork(t, dir, db, "touch started; exec sleep 600\n")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Wait for the first signal to be taken before sending the second.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "shutting down gracefully") {
		if time.Now().After(deadline) {
			t.Fatalf("first signal not logged:\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond) // polling a real process's output
	}
	// A second signal 150 ms after the first, as a person's second Ctrl-C
	// might be: only a duplicate delivery within a few milliseconds is
	// absorbed.
	time.Sleep(150 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(15 * time.Second):
		// The graceful stop waits 20 s for the script, which sleeps on.
		t.Fatalf("the second signal did not stop the worker at once:\n%s", stderr)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("work after a second signal: %v, want a non-zero exit\n%s", err, stderr)
	}
	list := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "sig", "--json").must(t).stdout)
	if len(list) != 1 || list[0]["state"] != "pending" {
		t.Fatalf("after a hard stop: %v, want the message pending at once, its 30 s lease released", list)
	}
}

// SIGTERM to the process and to its group at once, as GNU timeout sends
// it, is one request: a graceful stop that lets the running script finish.
func TestSignalToProcessAndGroupIsOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "dup.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "sig", "short").must(t)
	cmd, stderr := startWork(t, dir, db, "touch started; sleep 1; cat > /dev/null\n")
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("work after one SIGTERM delivered twice: %v, want a graceful exit 0\n%s", err, stderr)
	}
	if strings.Contains(stderr.String(), "second signal: stopping at once") {
		t.Fatalf("a duplicate delivery counted as a second signal:\n%s", stderr)
	}
	list := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "sig", "--json").must(t).stdout)
	if len(list) != 1 || list[0]["state"] != "completed" {
		t.Fatalf("after a graceful stop: %v, want the message completed", list)
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cmd := exec.Command(leaseholdBin(t), "demo")
	cmd.Dir, cmd.Env = tmp, append(os.Environ(), "TMPDIR="+tmp, "LEASEHOLD_DB=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	r := result{stdout: string(out)}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("demo left %s behind", left[0].Name())
	}
	for _, want := range []string{"keyed orders in order      true", "recovered by the reaper    1", "stale completions refused  1", "max_deliveries"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// alive reports whether the process whose pid is in file runs.
func alive(t *testing.T, file string) bool {
	t.Helper()
	return pidAlive(readPid(t, file))
}

func TestScriptChildrenDoNotOutliveTheirMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "kids.db")
	// A script that exits 0 leaving a child that holds its stderr, and one
	// that ignores SIGTERM past its maximum processing time.
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "kids", "--max-deliveries", "1", "leave").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "kids", "--max-deliveries", "1", "stubborn").must(t)
	handler := writeScript(t, dir, `
case "$(cat)" in
leave) sleep 60 & echo $! > leave.pid; exit 0 ;;
stubborn) trap '' TERM; sh -c "trap '' TERM; echo \$\$ > stubborn.pid; exec sleep 60" & wait ;;
esac
`)
	t0 := time.Now()
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "kids", "--lease", "1s", "--max-processing", "1s", "--drain", "--", handler).must(t)
	if took := time.Since(t0); took > 30*time.Second {
		t.Fatalf("work took %s", took)
	}
	for _, f := range []string{"leave.pid", "stubborn.pid"} {
		if alive(t, filepath.Join(dir, f)) {
			t.Fatalf("the process in %s outlived its message", f)
		}
	}
	byPayload := map[string]map[string]any{}
	for _, m := range jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "kids", "--json").must(t).stdout) {
		byPayload[m["payload"].(string)] = m
	}
	if byPayload["leave"]["state"] != "completed" {
		t.Fatalf("exit 0 with a child left running: %v", byPayload["leave"])
	}
	if m := byPayload["stubborn"]; m["state"] != "dead" || m["dead_reason"] != "max_processing_time" {
		t.Fatalf("a script past its maximum processing time: %v", m)
	}
}

func TestListBinaryPayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "bin.db")
	runBin(t, dir, "\xff\xfe\x00binary\n", "--db", db, "enqueue", "--queue", "bin").must(t)
	list := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "bin", "--json").must(t).stdout)
	if len(list) != 1 || list[0]["payload_base64"] != "//4AYmluYXJ5" || list[0]["payload"] != "" {
		t.Fatalf("listed %v, want the payload in base64", list)
	}
}

// startProcess starts the command with args in dir, its standard error
// captured, and kills it when the test ends if it still runs.
func startProcess(t *testing.T, dir string, args ...string) (*exec.Cmd, *testproc.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(leaseholdBin(t), args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "LEASEHOLD_DB=")
	stderr := &testproc.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, stderr
}

// waitUntil polls cond, a real process's doing, for up to 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%s did not happen within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a real process
	}
	return time.Since(start)
}
