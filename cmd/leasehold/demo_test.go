package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/demoscene"
	"github.com/leasehold/leasehold/internal/testproc"
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

			if !keep {
				if dbs, _ := filepath.Glob(filepath.Join(tmp, "leasehold-demo-*", "demo.db")); len(dbs) != 1 {
					t.Fatalf("the scene's temporary database: %v", dbs)
				}
			}
			checkScene(t, base, dead)

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

// checkScene checks each element of the scene through the dashboard of
// base (dead is the dead letter's id), and that its traffic is worked.
func checkScene(t *testing.T, base string, dead int64) {
	t.Helper()
	get := func(page string) string {
		t.Helper()
		resp, err := http.Get(base + page)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d, %v", page, resp.StatusCode, err)
		}
		return string(body)
	}
	// A queue's counts, as the queues page's live update reads them.
	type counts struct {
		Name                                       string
		Paused                                     bool
		Pending, Delayed, Waiting, Completed, Dead int64
	}
	queues := func() map[string]counts {
		t.Helper()
		var rows []counts
		if err := json.Unmarshal([]byte(get("/api/queues")), &rows); err != nil {
			t.Fatalf("/api/queues: %v", err)
		}
		byName := map[string]counts{}
		for _, r := range rows {
			byName[r.Name] = r
		}
		return byName
	}
	qs := queues()
	if s := qs[demoscene.Payments]; s.Waiting != demoscene.LaneWaiting {
		t.Errorf("%s: %+v, want %d waiting", demoscene.Payments, s, demoscene.LaneWaiting)
	}
	if s := qs[demoscene.Webhooks]; s.Dead < demoscene.DeadErrors {
		t.Errorf("%s: %+v, want %d dead", demoscene.Webhooks, s, demoscene.DeadErrors)
	}
	if s := qs[demoscene.Reports]; s.Delayed != demoscene.Delayed {
		t.Errorf("%s: %+v, want %d delayed", demoscene.Reports, s, demoscene.Delayed)
	}
	if s := qs[demoscene.Thumbnails]; !s.Paused || s.Pending < demoscene.Backlog {
		t.Errorf("%s: %+v, want paused with a backlog", demoscene.Thumbnails, s)
	}
	// The lane behind its running head, and the dead letter's errors.
	if keys := get("/queues/" + demoscene.Payments + "/keys"); !strings.Contains(keys, demoscene.LaneKey) || !strings.Contains(keys, "processing") {
		t.Errorf("the keys of %s do not show %s behind a processing head", demoscene.Payments, demoscene.LaneKey)
	}
	page := get(fmt.Sprintf("/queues/%s/messages/%d", demoscene.Webhooks, dead))
	for _, e := range []string{"503 Service Unavailable", "context deadline exceeded", "connection refused"} {
		if !strings.Contains(page, e) {
			t.Errorf("the dead letter's page does not show the error %q", e)
		}
	}
	// The workers go on: emails keep being completed.
	before := qs[demoscene.Emails].Completed
	deadline := time.Now().Add(30 * time.Second)
	for queues()[demoscene.Emails].Completed < before+3 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no more than %d completed in 30 s", demoscene.Emails, before)
		}
		time.Sleep(50 * time.Millisecond) // polling a real process's work
	}
}
