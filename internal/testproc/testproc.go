// Package testproc runs copies of the current test binary as separate OS
// processes, for tests of several processes sharing one database and for
// tests that signal, freeze or kill a process; and it says which tests the
// short inner loop (go test -short) leaves out.
package testproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// SkipShort skips t under go test -short, saying what it skips. A test
// that starts processes (the command, workers to kill, a browser) or cuts
// live connections waits in real time, seconds a test; the inner loop
// leaves those to the full run, without -short.
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s, which takes seconds; the full run (no -short) covers it", what)
	}
}

// Run starts n processes of the test binary, each running only the test
// named test with the extra environment variables env ("NAME=value"), and
// waits for all of them. It fails t with the output of any that fails.
func Run(ctx context.Context, t testing.TB, n int, test string, env ...string) {
	t.Helper()
	errs := make(chan error, n)
	for range n {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), env...)
		go func() {
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%s process: %v\n%s", test, err, out)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Child is a copy of the test binary running as a child process, whose
// standard output the test reads line by line. The binary's TestMain
// decides, from the environment it is given, what the child does.
type Child struct {
	Cmd   *exec.Cmd
	Stdin io.WriteCloser
	lines chan string
	exit  chan error
	once  sync.Once
	done  chan struct{}
	err   error
}

// Start starts a child with the extra environment variables env
// ("NAME=value"). The child is killed when the test ends, if it is still
// running.
func Start(t testing.TB, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{Cmd: cmd, Stdin: stdin, lines: make(chan string, 64), exit: make(chan error, 1)}
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
		_ = cmd.Process.Kill()
		<-c.Done()
	})
	return c
}

// Expect waits for the child to print a line starting with prefix and
// returns the line. A real process is waited on, so the bound is generous
// real time.
func (c *Child) Expect(t testing.TB, prefix string) string {
	t.Helper()
	deadline := clock.System().NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child ended before printing %q: %v", prefix, c.Wait(t))
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline.C():
			t.Fatalf("child did not print %q", prefix)
		}
	}
}

// Done returns a channel that is closed when the child has exited and its
// output has been read.
func (c *Child) Done() <-chan struct{} {
	c.once.Do(func() {
		c.done = make(chan struct{})
		go func() {
			c.err = <-c.exit
			close(c.done)
		}()
	})
	return c.done
}

// Wait waits up to 30 seconds for the child to exit and returns its exit
// error (with its stderr), nil for status 0.
func (c *Child) Wait(t testing.TB) error {
	t.Helper()
	deadline := clock.System().NewTimer(30 * time.Second)
	defer deadline.Stop()
	select {
	case <-c.Done():
		return c.err
	case <-deadline.C():
		t.Fatal("child did not exit")
		return nil
	}
}

// SyncBuffer is a buffer that a process writes while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (l *SyncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *SyncBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
