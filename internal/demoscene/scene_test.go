package demoscene_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/demoscene"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/sqlite"
)

// The scene is all there when Start returns; a minute later its traffic
// has been worked, some of it after a retry and some of it dead; Stop
// gives the long settlement back without using up a delivery.
func TestSceneElements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := memory.New(memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		sc, err := demoscene.Start(ctx, demoscene.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		stats := func(q string) store.Stats {
			t.Helper()
			s, err := st.Stats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		get := func(id int64) store.Info {
			t.Helper()
			in, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return in
		}

		// The lane: the settlement runs, the key's other payments wait.
		if h := get(sc.LaneHead); h.State != store.Processing || h.Key != demoscene.LaneKey || h.Queue != demoscene.Payments {
			t.Errorf("the lane's head is %s of %s in %s, want processing", h.State, h.Key, h.Queue)
		}
		if len(sc.LaneWaiters) != demoscene.LaneWaiting {
			t.Fatalf("the lane has %d waiters, want %d", len(sc.LaneWaiters), demoscene.LaneWaiting)
		}
		for _, id := range sc.LaneWaiters {
			if w := get(id); w.State != store.Waiting || w.Key != demoscene.LaneKey {
				t.Errorf("waiter %d is %s of %s, want waiting", id, w.State, w.Key)
			}
		}
		keys, err := st.BlockedKeys(ctx, demoscene.Payments, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(keys, func(k store.BlockedKey) bool { return k.Key == demoscene.LaneKey }); i < 0 || keys[i].Waiting != demoscene.LaneWaiting {
			t.Errorf("blocked keys of %s: %+v, want %s with %d waiting", demoscene.Payments, keys, demoscene.LaneKey, demoscene.LaneWaiting)
		}

		// The dead letters: three deliveries each, three different errors.
		if len(sc.DeadLetters) == 0 {
			t.Fatal("no dead letters")
		}
		for _, id := range sc.DeadLetters {
			dead := get(id)
			if dead.State != store.Dead || dead.Deliveries != demoscene.DeadErrors || len(dead.Errors) != demoscene.DeadErrors {
				t.Fatalf("dead letter %d is %s after %d deliveries with %d errors, want dead after %d with as many errors",
					id, dead.State, dead.Deliveries, len(dead.Errors), demoscene.DeadErrors)
			}
			for i, e := range dead.Errors {
				if e.Attempt != i+1 || e.WorkerID == "" || (i > 0 && e.Error == dead.Errors[i-1].Error) {
					t.Errorf("error %d of dead letter %d: %+v", i, id, e)
				}
			}
			if !strings.Contains(dead.LastError, "connection refused") {
				t.Errorf("dead letter %d's last error is %q", id, dead.LastError)
			}
		}

		// Reports wait for their time; thumbnails for a resume.
		if s := stats(demoscene.Reports); s.Delayed != demoscene.Delayed || s.Pending != demoscene.Delayed {
			t.Errorf("reports: %+v, want %d delayed", s, demoscene.Delayed)
		}
		if s := stats(demoscene.Thumbnails); !s.Paused || s.Pending < demoscene.Backlog {
			t.Errorf("thumbnails: %+v, want paused with %d or more pending", s, demoscene.Backlog)
		}

		// A minute of traffic.
		time.Sleep(time.Minute)
		synctest.Wait()
		emails := stats(demoscene.Emails)
		if emails.Completed < 100 || emails.Dead < 1 {
			t.Errorf("emails after a minute: %+v, want a hundred completed and a bounce dead", emails)
		}
		retried, err := st.List(ctx, store.ListFilter{Queue: demoscene.Emails, State: store.Completed, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(retried, func(in store.Info) bool { return in.Deliveries == 2 }) {
			t.Errorf("no email was completed on its second delivery")
		}
		for _, q := range []string{demoscene.Payments, demoscene.Webhooks} {
			if s := stats(q); s.Completed < 10 {
				t.Errorf("%s after a minute: %+v, want work completed", q, s)
			}
		}
		if s := stats(demoscene.Thumbnails); s.Completed != 0 || s.Pending <= demoscene.Backlog {
			t.Errorf("the paused queue after a minute: %+v, want a growing backlog and nothing done", s)
		}

		if err := sc.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if h := get(sc.LaneHead); h.State != store.Pending || h.Deliveries != 0 || h.LastError != "" || !h.VisibleAt.After(time.Now()) {
			t.Errorf("the settlement after Stop: %s, %d deliveries, error %q, visible at %s; want pending later, none used up",
				h.State, h.Deliveries, h.LastError, h.VisibleAt)
		}
	})
}

// A scene needs a database of its own: on one that holds a queue, Start
// says so and changes nothing.
func TestSceneRefusesADatabaseInUse(t *testing.T) {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "jobs", Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	_, err = demoscene.Start(ctx, demoscene.Config{Store: st})
	if !errors.Is(err, demoscene.ErrInUse) || !strings.Contains(err.Error(), "1 queue(s) already (jobs first)") {
		t.Fatalf("Start on a database in use: %v", err)
	}
	if qs, _ := st.Queues(ctx); !slices.Equal(qs, []string{"jobs"}) {
		t.Errorf("the queues after the refusal: %v", qs)
	}
}

// With Past, the scene starts with an hour of completions behind it, each
// in its minute of that hour, on the same database.
func TestSceneHistory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "scene.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	began := clock.System().Now()
	sc, err := demoscene.Start(ctx, demoscene.Config{Store: st, Past: func(ctx context.Context, clk clock.Clock) (store.Store, error) {
		return sqlite.Open(ctx, sqlite.Config{Path: path, Clock: clk})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sc.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	for _, q := range []string{demoscene.Emails, demoscene.Payments, demoscene.Webhooks, demoscene.Thumbnails} {
		done, err := st.List(ctx, store.ListFilter{Queue: q, State: store.Completed, Limit: store.MaxBatch})
		if err != nil {
			t.Fatal(err)
		}
		if len(done) < demoscene.HistoryMinutes {
			t.Fatalf("%s has %d completed, want an hour's", q, len(done))
		}
		first, last := done[0].FinishedAt, done[len(done)-1].FinishedAt
		if first.After(began.Add(-(demoscene.HistoryMinutes-1)*time.Minute)) || first.Before(began.Add(-(demoscene.HistoryMinutes+1)*time.Minute)) {
			t.Errorf("%s's first completion at %s, want about %d minutes before %s", q, first, demoscene.HistoryMinutes, began)
		}
		if q != demoscene.Thumbnails && last.Before(began.Add(-2*time.Minute)) {
			t.Errorf("%s's history ends at %s, want in the minute before %s", q, last, began)
		}
	}
	retried, err := st.List(ctx, store.ListFilter{Queue: demoscene.Webhooks, State: store.Completed, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(retried, func(in store.Info) bool { return in.Deliveries == 2 }) {
		t.Errorf("no webhook of the past was completed on its second delivery")
	}
	if s, err := st.Stats(ctx, demoscene.Thumbnails); err != nil || !s.Paused {
		t.Errorf("%s after the history: %+v, %v; want paused", demoscene.Thumbnails, s, err)
	}
}
