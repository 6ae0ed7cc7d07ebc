package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store/sqlite"
)

// TestDemoWhicheverReaperRecoversTheCrashedJob runs the tour while another
// process's reaper races the tour's own for the job of the killed worker,
// as any reaper on the database may: the tour must go on whichever takes
// it back, rather than wait for its own reaper to report it.
func TestDemoWhicheverReaperRecoversTheCrashedJob(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cmd := exec.Command(leaseholdBin(t), "demo")
	cmd.Dir, cmd.Env = tmp, append(os.Environ(), "TMPDIR="+tmp, "LEASEHOLD_DB=")
	out := &testproc.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	// The step that kills a worker has begun: the tour's database exists
	// and has its schema.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "\n4. ") {
		if time.Now().After(deadline) {
			t.Fatalf("the tour did not reach its fourth step:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond) // polling a real process's output
	}
	dbs, _ := filepath.Glob(filepath.Join(tmp, "leasehold-demo-*", "demo.db"))
	if len(dbs) != 1 {
		t.Fatalf("the tour's database: %v", dbs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: dbs[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reaped := 0
	tick := clock.System().NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("demo with another reaper at work: %v\n%s", err, out)
			}
			if !strings.Contains(out.String(), "recovered by the reaper    1") {
				t.Fatalf("demo output lacks the recovered job:\n%s", out)
			}
			if reaped == 0 {
				t.Log("the tour's reaper won the race this time")
			}
			return
		case <-tick.C():
			rec, _ := st.Reap(ctx) // the tour removes the database when it ends
			reaped += len(rec)
		}
	}
}
