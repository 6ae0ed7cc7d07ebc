// Package testproc runs copies of the current test binary as separate OS
// processes, for tests of several processes sharing one database.
package testproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

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
