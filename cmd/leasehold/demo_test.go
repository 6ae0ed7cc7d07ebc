package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/demoscene"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
)

// startDemo starts the command with args in tmp, its temporary files
// there too, and kills it at the end of the test if it still runs; done
// receives its end.
func startDemo(t *testing.T, tmp string, stdout, stderr *testproc.SyncBuffer, args ...string) (*exec.Cmd, <-chan error) {
	t.Helper()
	cmd := exec.Command(leaseholdBin(t), args...)
	cmd.Dir, cmd.Env = tmp, append(os.Environ(), "TMPDIR="+tmp, "LEASEHOLD_DB=")
	cmd.Stdout, cmd.Stderr = stdout, stderr
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
	return cmd, done
}

// TestDemoWhicheverReaperRecoversTheCrashedJob runs the tour while another
// process's reaper races the tour's own for the job of the killed worker,
// as any reaper on the database may: the tour must go on whichever takes
// it back, rather than wait for its own reaper to report it.
func TestDemoWhicheverReaperRecoversTheCrashedJob(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	out := &testproc.SyncBuffer{}
	_, done := startDemo(t, tmp, out, out, "demo")
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

// demo --serve sets its scene on a temporary SQLite file and serves its
// dashboard: every element is there when it prints the address, the
// traffic goes on, and SIGINT stops it cleanly, the file removed; with
// --db the file stays.
func TestDemoServe(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			args := []string{"demo", "--serve", "--addr", "127.0.0.1:0"}
			kept := filepath.Join(tmp, "scene.db")
			if keep {
				args = append([]string{"--db", kept}, args...)
			}
			out, errs := &testproc.SyncBuffer{}, &testproc.SyncBuffer{}
			cmd, done := startDemo(t, tmp, out, errs, args...)
			printed := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/queues/webhooks/messages/(\d+):`)
			var m []string
			deadline := time.Now().Add(60 * time.Second)
			for m = printed.FindStringSubmatch(out.String()); m == nil; m = printed.FindStringSubmatch(out.String()) {
				if time.Now().After(deadline) {
					t.Fatalf("demo --serve printed no address:\n%s\n%s", out, errs)
				}
				time.Sleep(20 * time.Millisecond) // polling a real process's output
			}
			base := m[1]
			dead, _ := strconv.ParseInt(m[2], 10, 64)

			path := kept
			if !keep {
				dbs, _ := filepath.Glob(filepath.Join(tmp, "leasehold-demo-*", "demo.db"))
				if len(dbs) != 1 {
					t.Fatalf("the scene's database: %v", dbs)
				}
				path = dbs[0]
			}
			ctx := context.Background()
			st, err := sqlite.Open(ctx, sqlite.Config{Path: path, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			checkScene(t, st, dead)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}

			// The dashboard shows the lane and the dead letter's errors.
			for page, want := range map[string]string{
				"/queues/" + demoscene.Payments + "/keys":                       demoscene.LaneKey,
				fmt.Sprintf("/queues/%s/messages/%d", demoscene.Webhooks, dead): "connection refused",
			} {
				resp, err := http.Get(base + page)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
					t.Errorf("GET %s = %d without %q", page, resp.StatusCode, want)
				}
			}

			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("demo --serve after SIGINT: %v\n%s", err, errs)
			}
			if e := errs.String(); strings.Contains(e, "level=ERROR") || strings.Contains(e, "level=WARN") {
				t.Errorf("demo --serve logged trouble:\n%s", e)
			}
			left, _ := filepath.Glob(filepath.Join(tmp, "leasehold-demo-*"))
			if len(left) != 0 {
				t.Errorf("demo --serve left %v behind", left)
			}
			if _, err := os.Stat(kept); keep != (err == nil) {
				t.Errorf("with --db %v, the file after the stop: %v", keep, err)
			}
		})
	}
}

// checkScene checks each element of the scene in st, the dead letter
// being dead, and that its traffic is worked.
func checkScene(t *testing.T, st store.Store, dead int64) {
	t.Helper()
	ctx := context.Background()
	stats := func(q string) store.Stats {
		t.Helper()
		s, err := st.Stats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if in, err := st.Get(ctx, dead); err != nil || in.State != store.Dead || len(in.Errors) != demoscene.DeadErrors {
		t.Errorf("the dead letter %d: %s with %d errors, %v", dead, in.State, len(in.Errors), err)
	}
	keys, err := st.BlockedKeys(ctx, demoscene.Payments, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(keys, func(k store.BlockedKey) bool { return k.Key == demoscene.LaneKey }); i < 0 ||
		keys[i].Waiting != demoscene.LaneWaiting || keys[i].Head.State != store.Processing {
		t.Errorf("blocked keys of %s: %+v, want %s with %d waiting behind a processing head", demoscene.Payments, keys, demoscene.LaneKey, demoscene.LaneWaiting)
	}
	if s := stats(demoscene.Reports); s.Delayed != demoscene.Delayed {
		t.Errorf("%s: %+v, want %d delayed", demoscene.Reports, s, demoscene.Delayed)
	}
	if s := stats(demoscene.Thumbnails); !s.Paused || s.Pending < demoscene.Backlog {
		t.Errorf("%s: %+v, want paused with a backlog", demoscene.Thumbnails, s)
	}
	// The workers go on: emails keep being completed.
	before := stats(demoscene.Emails).Completed
	deadline := time.Now().Add(30 * time.Second)
	for stats(demoscene.Emails).Completed < before+3 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no more than %d completed in 30 s", demoscene.Emails, before)
		}
		time.Sleep(50 * time.Millisecond) // polling a real process's work
	}
}
