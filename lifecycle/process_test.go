package lifecycle_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/lifecycle"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
	"github.com/leasehold/leasehold/worker"
)

// The child process: this test binary started with childEnv set runs a
// group with one worker on a SQLite file, with the coordinator listening
// for SIGTERM and SIGINT, and exits 0 when the group stopped cleanly.
const (
	childEnv     = "LEASEHOLD_LIFECYCLE_CHILD" // the handler: "slow" or "block"
	childDBEnv   = "LEASEHOLD_LIFECYCLE_DB"
	childQueue   = "signals"
	childTimeout = 10 * time.Second
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode, os.Getenv(childDBEnv)))
	}
	os.Exit(m.Run())
}

func childMain(mode, path string) int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer st.Close()
	say := func(line string) { fmt.Fprintln(os.Stdout, line) } // unbuffered: the parent reads at once
	w, err := worker.New(worker.Config{Store: st, Queue: childQueue, Concurrency: 1, HardStopWait: time.Second,
		ShutdownTimeout: childTimeout, Logger: quietLogger(),
		Handler: worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			say(fmt.Sprintf("started %d", m.MessageID))
			if mode == "block" {
				<-ctx.Done()
				return context.Cause(ctx)
			}
			select {
			case <-time.After(time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	g, err := lifecycle.NewGroup(lifecycle.GroupConfig{ShutdownTimeout: childTimeout}, w)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	c := lifecycle.NewCoordinator()
	stop := c.Listen()
	defer stop()
	c.Register(func() {
		say("draining")
		go func() { _ = g.Shutdown(ctx) }()
	})
	c.OnEscalate(func() {
		say("hard stop")
		done, cancel := context.WithCancel(ctx)
		cancel()
		go func() { _ = g.Shutdown(done) }()
	})
	say("ready")
	if err := g.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "group:", err)
		return 1
	}
	return 0
}

// child is a running child process and its stdout lines.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	exit  chan error
}

func startChild(t *testing.T, mode, path string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childDBEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16), exit: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w; stderr: %s", err, stderr.String())
		}
		c.exit <- err
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return c
}

// expect waits for the child to print a line starting with prefix. A real
// process is waited on, so the bound is generous real time.
func (c *child) expect(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child ended before printing %q: %v", prefix, <-c.exit)
			}
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("child did not print %q", prefix)
		}
	}
}

func (c *child) wait(t *testing.T) (time.Duration, error) {
	t.Helper()
	t0 := time.Now()
	select {
	case err := <-c.exit:
		return time.Since(t0), err
	case <-time.After(30 * time.Second):
		t.Fatal("child did not exit")
		return 0, nil
	}
}

func openDB(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lifecycle.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, path
}

func TestSIGTERMLetsInFlightMessageFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, path := openDB(t)
	res, err := st.Enqueue(ctx, []store.NewMessage{{Queue: childQueue, Payload: []byte("slow")}})
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "slow", path)
	c.expect(t, "started")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took, err := c.wait(t)
	if err != nil {
		t.Fatalf("child exit: %v, want status 0", err)
	}
	if took >= childTimeout {
		t.Fatalf("child took %s to exit, more than its shutdown timeout", took)
	}
	infos, err := st.List(ctx, store.ListFilter{Queue: childQueue, State: store.Completed})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != res[0].ID || infos[0].Deliveries != 1 {
		t.Fatalf("completed after SIGTERM: %+v, want message %d completed on its first delivery", infos, res[0].ID)
	}
}

func TestSecondSignalHardStopsAndReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, path := openDB(t)
	res, err := st.Enqueue(ctx, []store.NewMessage{{Queue: childQueue, Payload: []byte("stuck")}})
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "block", path)
	c.expect(t, "started")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "draining")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took, err := c.wait(t)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("child exit after a second signal: %v, want a non-zero status", err)
	}
	if took >= childTimeout {
		t.Fatalf("hard stop took %s, not at once", took)
	}
	// The 30 s lease was released: another worker claims the message now.
	ds, err := st.Claim(ctx, store.Claim{Queue: childQueue, WorkerID: "next", Max: 1, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].MessageID != res[0].ID || ds[0].Attempt != 2 {
		t.Fatalf("claim after the hard stop: %+v, want message %d on its second delivery", ds, res[0].ID)
	}
}
