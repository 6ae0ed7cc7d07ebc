package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store/memory"
)

// childEnv makes the test binary run signalChild instead of the tests.
const childEnv = "LEASEHOLD_TEST_SIGNAL_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(signalChild())
	}
	os.Exit(m.Run())
}

// signalChild works one job that takes 2 s under RunUntilSignal, saying
// on standard output when the job runs and how it and the client ended.
func signalChild() int {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet(),
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {}}})
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
		fmt.Println("running")
		select {
		case <-time.After(2 * time.Second):
			fmt.Println("finished")
			return nil
		case <-ctx.Done():
			fmt.Println("cancelled")
			return context.Cause(ctx)
		}
	})
	if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
		fmt.Println("error:", err)
		return 2
	}
	err = c.RunUntilSignal(ctx)
	fmt.Println("stopped:", err)
	if err != nil {
		return 1
	}
	return 0
}

func TestRunUntilSignal(t *testing.T) {
	testproc.SkipShort(t, "signals a client in a child process")
	for _, tc := range []struct {
		name    string
		signals int
		outcome string
	}{
		{"one signal drains", 1, "finished"},
		{"a second signal stops at once", 2, "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			child := testproc.Start(t, childEnv+"=1")
			child.Expect(t, "running")
			for i := range tc.signals {
				if i > 0 {
					time.Sleep(150 * time.Millisecond) // a person's second Ctrl-C
				}
				if err := child.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			child.Expect(t, tc.outcome)
			line := child.Expect(t, "stopped:")
			err := child.Wait(t)
			if tc.signals == 1 && (err != nil || line != "stopped: <nil>") {
				t.Fatalf("after one signal: %q, exit %v; want a clean stop", line, err)
			}
			var exit interface{ ExitCode() int }
			if tc.signals == 2 && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
				t.Fatalf("after two signals: %q, exit %v; want a hard stop", line, err)
			}
		})
	}
}
