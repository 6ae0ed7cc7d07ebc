package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/lifecycle"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
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
	cfg := workerOn(st, childQueue, func(ctx context.Context, m *worker.Message) error {
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
	})
	cfg.HardStopWait, cfg.ShutdownTimeout = time.Second, childTimeout
	w, err := worker.New(cfg)
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

func startChild(t *testing.T, mode, path string) *testproc.Child {
	t.Helper()
	return testproc.Start(t, childEnv+"="+mode, childDBEnv+"="+path)
}

// waitExit waits for the child to exit and says how long that took.
func waitExit(t *testing.T, c *testproc.Child) (time.Duration, error) {
	t.Helper()
	t0 := time.Now()
	err := c.Wait(t)
	return time.Since(t0), err
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
	testproc.SkipShort(t, "signals a worker process")
	t.Parallel()
	ctx := context.Background()
	st, path := openDB(t)
	res, err := st.Enqueue(ctx, []store.NewMessage{{Queue: childQueue, Payload: []byte("slow")}})
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "slow", path)
	c.Expect(t, "started")
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took, err := waitExit(t, c)
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
	testproc.SkipShort(t, "signals a worker process")
	t.Parallel()
	ctx := context.Background()
	st, path := openDB(t)
	res, err := st.Enqueue(ctx, []store.NewMessage{{Queue: childQueue, Payload: []byte("stuck")}})
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "block", path)
	c.Expect(t, "started")
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.Expect(t, "draining")
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took, err := waitExit(t, c)
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
