package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store"
)

// jobsFixture is a client of a store, and the store beside it, which the
// tests use as a worker would: to claim, fail and complete jobs by hand.
type jobsFixture struct {
	t   *testing.T
	ctx context.Context
	st  store.Store
	c   *leasehold.Client[store.NoTx]
}

func newJobsFixture(t *testing.T, st store.Store) *jobsFixture {
	return &jobsFixture{t: t, ctx: t.Context(), st: st, c: clientOf(t, st, leasehold.Config{})}
}

func (f *jobsFixture) enqueue(args leasehold.JobArgs, opts *leasehold.EnqueueOptions) int64 {
	f.t.Helper()
	res, err := f.c.Enqueue(f.ctx, args, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return res.ID
}

// claim claims one job of the queue, which must be want.
func (f *jobsFixture) claim(queue string, want int64) store.Delivery {
	f.t.Helper()
	ds, err := f.st.Claim(f.ctx, store.Claim{Queue: queue, WorkerID: "worker-1", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].MessageID != want {
		f.t.Fatalf("claim of %s = %+v, %v; want job %d", queue, ds, err, want)
	}
	return ds[0]
}

func (f *jobsFixture) claimNone(queue string) {
	f.t.Helper()
	ds, err := f.st.Claim(f.ctx, store.Claim{Queue: queue, WorkerID: "worker-1", Max: 10, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 0 {
		f.t.Fatalf("claim of %s = %+v, %v; want nothing", queue, ds, err)
	}
}

func (f *jobsFixture) complete(d store.Delivery) {
	f.t.Helper()
	if res, err := f.st.Complete(f.ctx, []store.Completion{{Lease: d.Lease}}); err != nil || res[0] != nil {
		f.t.Fatalf("complete %d: %v, %v", d.MessageID, res, err)
	}
}

// finished makes a completed, a dead and a cancelled job on the queue.
func (f *jobsFixture) finished(queue string) (completed, dead, cancelled int64) {
	f.t.Helper()
	opts := &leasehold.EnqueueOptions{Queue: queue}
	completed = f.enqueue(sendEmail{To: "done"}, opts)
	f.complete(f.claim(queue, completed))
	dead = f.enqueue(sendEmail{To: "dead"}, opts)
	d := f.claim(queue, dead)
	if _, err := f.st.Fail(f.ctx, store.Failure{Lease: d.Lease, Error: "smtp refused", Permanent: true}); err != nil {
		f.t.Fatal(err)
	}
	cancelled = f.enqueue(sendEmail{To: "cancelled"}, opts)
	if err := f.c.Cancel(f.ctx, cancelled); err != nil {
		f.t.Fatal(err)
	}
	return completed, dead, cancelled
}

func (f *jobsFixture) get(id int64) *leasehold.JobRow {
	f.t.Helper()
	row, err := f.c.JobGet(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return row
}

func (f *jobsFixture) stats(queue string) store.Stats {
	f.t.Helper()
	st, err := f.st.Stats(f.ctx, queue)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// refusesRunningAndMissing checks that op refuses a running job, which
// stays running under its lease until its worker completes it, and a
// missing job, each with a one-line error.
func (f *jobsFixture) refusesRunningAndMissing(op string, fn func(context.Context, int64) (*leasehold.JobRow, error)) {
	f.t.Helper()
	running := f.enqueue(sendEmail{To: "running"}, &leasehold.EnqueueOptions{Queue: "busy"})
	d := f.claim("busy", running)
	_, err := fn(f.ctx, running)
	wantOneLine(f.t, op+" of a running job", err, leasehold.ErrJobRunning)
	_, err = fn(f.ctx, 987654)
	wantOneLine(f.t, op+" of a missing job", err, leasehold.ErrJobNotFound)
	if row := f.get(running); row.State != leasehold.JobStateRunning || row.FencingToken != d.FencingToken {
		f.t.Fatalf("a running job after a refused %s: %+v", op, row)
	}
	f.complete(d)
}

// wantOneLine checks that err is a one-line error matching target.
func wantOneLine(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%s: %v, want one line wrapping %v", what, err, target)
	}
}

// JobGet gives every field a dashboard shows, the error history
// included; a missing job is ErrJobNotFound, which is store.ErrNotFound.
func TestJobGet(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		f := newJobsFixture(t, st)
		id := f.enqueue(sendEmail{To: "a@example.com"}, &leasehold.EnqueueOptions{Queue: "mail", Key: "user-1",
			DedupID: "d-1", Priority: 7, MaxDeliveries: 3, Metadata: map[string]string{"tenant": "acme"}})
		row := f.get(id)
		if row.Metadata["tenant"] != "acme" || len(row.Metadata) != 1 {
			t.Fatalf("JobGet's metadata = %v, want the enqueue's", row.Metadata)
		}
		if row.ID != id || row.Queue != "mail" || row.Kind != "send_email" || row.Key != "user-1" || row.DedupID != "d-1" ||
			row.Priority != 7 || row.MaxDeliveries != 3 || row.Attempt != 0 || row.State != leasehold.JobStatePending ||
			string(row.Args) != `{"to":"a@example.com"}` || row.EnqueuedAt.IsZero() || row.ScheduledAt.IsZero() ||
			!row.AttemptedAt.IsZero() || !row.FinishedAt.IsZero() || row.WorkerID != "" || len(row.Errors) != 0 {
			t.Fatalf("JobGet of a new job = %+v", row)
		}

		d := f.claim("mail", id)
		row = f.get(id)
		if row.State != leasehold.JobStateRunning || row.Attempt != 1 || row.WorkerID != "worker-1" ||
			row.FencingToken != d.FencingToken || row.AttemptedAt.IsZero() || !row.LeaseExpires.Equal(d.LeaseExpires) {
			t.Fatalf("JobGet of a running job = %+v, claimed as %+v", row, d)
		}
		if _, err := st.Fail(f.ctx, store.Failure{Lease: d.Lease, Error: "timeout", Permanent: true}); err != nil {
			t.Fatal(err)
		}
		row = f.get(id)
		if row.State != leasehold.JobStateDead || row.DeadReason != store.ReasonPermanent || row.LastError != "timeout" ||
			row.FinishedAt.IsZero() || len(row.Errors) != 1 ||
			row.Errors[0].Attempt != 1 || row.Errors[0].WorkerID != "worker-1" || row.Errors[0].Error != "timeout" || row.Errors[0].At.IsZero() {
			t.Fatalf("JobGet of a dead job = %+v", row)
		}

		_, err := f.c.JobGet(f.ctx, 987654)
		wantOneLine(t, "JobGet of a missing job", err, leasehold.ErrJobNotFound)
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("JobGet of a missing job: %v, want store.ErrNotFound too", err)
		}
	})
}

// JobList lists by id across queues and states, filtered, paged either
// way, without error histories; bad parameters are refused in one line.
func TestJobList(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		f := newJobsFixture(t, st)
		completed, dead, cancelled := f.finished("mail")
		pending := f.enqueue(chargeCard{Cents: 5}, &leasehold.EnqueueOptions{Queue: "billing", Key: "acct"})
		waiting := f.enqueue(chargeCard{Cents: 6}, &leasehold.EnqueueOptions{Queue: "billing", Key: "acct"})
		later := f.enqueue(sendEmail{To: "later"}, &leasehold.EnqueueOptions{Queue: "mail", Delay: time.Hour})
		running := f.enqueue(chargeCard{Cents: 7}, &leasehold.EnqueueOptions{Queue: "cards"})
		f.claim("cards", running)

		list := func(p leasehold.JobListParams) []int64 {
			t.Helper()
			res, err := f.c.JobList(f.ctx, &p)
			if err != nil {
				t.Fatalf("JobList(%+v): %v", p, err)
			}
			ids := make([]int64, len(res.Jobs))
			for i, r := range res.Jobs {
				ids[i] = r.ID
				if r.Errors != nil {
					t.Fatalf("JobList gave job %d its errors %+v; want none", r.ID, r.Errors)
				}
			}
			return ids
		}
		all := []int64{completed, dead, cancelled, pending, waiting, later, running}
		for _, c := range []struct {
			p    leasehold.JobListParams
			want []int64
		}{
			{leasehold.JobListParams{}, all},
			{leasehold.JobListParams{Limit: 3}, all[:3]},
			{leasehold.JobListParams{After: cancelled, Limit: 2}, []int64{pending, waiting}},
			{leasehold.JobListParams{Before: later, Limit: 2}, []int64{waiting, pending}},
			{leasehold.JobListParams{After: dead, Before: later}, []int64{waiting, pending, cancelled}},
			{leasehold.JobListParams{Queue: "mail"}, []int64{completed, dead, cancelled, later}},
			{leasehold.JobListParams{Kind: "charge_card"}, []int64{pending, waiting, running}},
			{leasehold.JobListParams{Key: "acct"}, []int64{pending, waiting}},
			{leasehold.JobListParams{States: []leasehold.JobState{leasehold.JobStateDead, leasehold.JobStateRunning, leasehold.JobStateDead}},
				[]int64{dead, running}},
			{leasehold.JobListParams{Queue: "mail", States: []leasehold.JobState{leasehold.JobStatePending}}, []int64{later}},
			{leasehold.JobListParams{Queue: "nowhere"}, []int64{}},
		} {
			if got := list(c.p); !slices.Equal(got, c.want) {
				t.Errorf("JobList(%+v) = %v, want %v", c.p, got, c.want)
			}
		}

		// Next pages through every job, and is zero on the last page.
		var paged []int64
		for p := (leasehold.JobListParams{Limit: 3}); ; {
			res, err := f.c.JobList(f.ctx, &p)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Jobs {
				paged = append(paged, r.ID)
			}
			if res.Next == 0 {
				break
			}
			if len(paged) > len(all) {
				t.Fatalf("paged %v, past every job", paged)
			}
			p.After = res.Next
		}
		if !slices.Equal(paged, all) {
			t.Errorf("pages of 3 gave %v, want %v", paged, all)
		}
		if res, err := f.c.JobList(f.ctx, nil); err != nil || len(res.Jobs) != len(all) || res.Next != 0 {
			t.Errorf("JobList(nil) = %+v, %v; want every job on one page", res, err)
		}

		for _, bad := range []leasehold.JobListParams{
			{Limit: -1},
			{Limit: store.MaxBatch + 1},
			{States: []leasehold.JobState{leasehold.JobStatePending, "processing"}},
			{States: []leasehold.JobState{""}},
			{After: -5},
			{Before: -5},
			{Kind: strings.Repeat("k", store.MaxNameLength+1)},
			{Key: "a\x00b"},
			{Queue: strings.Repeat("q", store.MaxNameLength+1)},
		} {
			_, err := f.c.JobList(f.ctx, &bad)
			wantOneLine(t, fmt.Sprintf("JobList(%+v)", bad), err, store.ErrInvalid)
			// A store without queues refuses it too.
			_, err = newJobsFixture(t, memoryStore(t)).c.JobList(f.ctx, &bad)
			wantOneLine(t, fmt.Sprintf("JobList(%+v) of an empty store", bad), err, store.ErrInvalid)
		}
	})
}

// JobList finds a few completed jobs of a kind among 10,000 completed
// jobs of another. That the listing reads the completed kind index, not
// the history, the stores' plan tests check (PostgreSQL's
// TestBrowsingReadsNoHistory, SQLite's TestListPlansUseTheirIndexes).
func TestJobListAmongHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("enqueues and completes 10,000 jobs")
	}
	onEachBackend(t, func(t *testing.T, st store.Store) {
		f := newJobsFixture(t, st)
		var mine []int64
		for batch := range 10 {
			msgs := make([]store.NewMessage, 1000)
			for i := range msgs {
				msgs[i] = store.NewMessage{Queue: "history", Kind: "other", Payload: []byte("{}")}
			}
			if _, err := st.Enqueue(f.ctx, msgs); err != nil {
				t.Fatal(err)
			}
			if batch%3 == 0 {
				mine = append(mine, f.enqueue(sendEmail{To: fmt.Sprint(batch)}, &leasehold.EnqueueOptions{Queue: "history"}))
			}
			ds, err := st.Claim(f.ctx, store.Claim{Queue: "history", WorkerID: "w", Max: 2000, LeaseDuration: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			cs := make([]store.Completion, len(ds))
			for i, d := range ds {
				cs[i] = store.Completion{Lease: d.Lease}
			}
			if _, err := st.Complete(f.ctx, cs); err != nil {
				t.Fatal(err)
			}
		}
		if s := f.stats("history"); s.Completed != 10_000+int64(len(mine)) {
			t.Fatalf("completed %d, want %d", s.Completed, 10_000+len(mine))
		}
		res, err := f.c.JobList(f.ctx, &leasehold.JobListParams{Kind: "send_email", States: []leasehold.JobState{leasehold.JobStateCompleted}})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, r := range res.Jobs {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, mine) {
			t.Fatalf("JobList of completed send_email jobs = %v, want %v", got, mine)
		}
		res, err = f.c.JobList(f.ctx, &leasehold.JobListParams{Queue: "history", Before: mine[len(mine)-1], Limit: 2})
		if err != nil || len(res.Jobs) != 2 || res.Jobs[0].ID != mine[len(mine)-1]-1 || res.Next != res.Jobs[1].ID {
			t.Fatalf("JobList of the page before job %d = %+v, %v", mine[len(mine)-1], res, err)
		}
	})
}

// JobRetry runs a completed, dead or cancelled job again now with a
// fresh budget, off the completed count, its errors kept; hastens a
// delayed job; queues a keyed job behind its key's running head; and
// refuses a running job, which goes on under its lease, and a missing
// one.
func TestJobRetry(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		f := newJobsFixture(t, st)
		completed, dead, cancelled := f.finished("mail")
		later := f.enqueue(sendEmail{To: "later"}, &leasehold.EnqueueOptions{Queue: "mail", Delay: time.Hour})
		f.refusesRunningAndMissing("JobRetry", f.c.JobRetry)

		if s := f.stats("mail"); s.Completed != 1 || s.Dead != 1 || s.Cancelled != 1 || s.Delayed != 1 {
			t.Fatalf("stats before retries %+v", s)
		}
		for _, id := range []int64{completed, dead, cancelled, later} {
			row, err := f.c.JobRetry(f.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if row.ID != id || row.State != leasehold.JobStatePending || row.Attempt != 0 || !row.FinishedAt.IsZero() ||
				row.DeadReason != "" || row.FencingToken != 0 {
				t.Fatalf("JobRetry(%d) = %+v, want it pending with a fresh budget", id, row)
			}
		}
		if row := f.get(dead); len(row.Errors) != 1 || row.Errors[0].Error != "smtp refused" {
			t.Fatalf("a retried dead job's errors %+v, want its history kept", row.Errors)
		}
		if s := f.stats("mail"); s.Completed != 0 || s.Dead != 0 || s.Cancelled != 0 || s.Pending != 4 || s.Delayed != 0 {
			t.Fatalf("stats after retries %+v, want 4 pending and visible", s)
		}
		ds, err := st.Claim(f.ctx, store.Claim{Queue: "mail", WorkerID: "w", Max: 10, LeaseDuration: time.Minute})
		if err != nil || len(ds) != 4 {
			t.Fatalf("claimed %d, %v; want the 4 retried jobs", len(ds), err)
		}
		for _, d := range ds {
			if d.Attempt != 1 {
				t.Fatalf("retried job %d claimed as attempt %d, want 1", d.MessageID, d.Attempt)
			}
		}

		// A keyed job waits behind its key's running head, and a waiting
		// job stays as it is.
		keyed := &leasehold.EnqueueOptions{Queue: "keyed", Key: "k"}
		first := f.enqueue(sendEmail{To: "1"}, keyed)
		f.complete(f.claim("keyed", first))
		head := f.enqueue(sendEmail{To: "2"}, keyed)
		hd := f.claim("keyed", head)
		if row, err := f.c.JobRetry(f.ctx, first); err != nil || row.State != leasehold.JobStateWaiting {
			t.Fatalf("JobRetry of a keyed job behind a running head = %+v, %v; want waiting", row, err)
		}
		if row, err := f.c.JobRetry(f.ctx, first); err != nil || row.State != leasehold.JobStateWaiting {
			t.Fatalf("JobRetry of a waiting job = %+v, %v; want it left waiting", row, err)
		}
		f.claimNone("keyed")
		f.complete(hd)
		f.claim("keyed", first)
	})
}

// JobDelete deletes a job in any state but running and returns it as it
// was; a deleted pending head lets its key's next job go; the completed
// count follows. A running job refuses and goes on under its lease; a
// missing one refuses.
func TestJobDelete(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		f := newJobsFixture(t, st)
		completed, dead, cancelled := f.finished("mail")
		head := f.enqueue(chargeCard{Cents: 1}, &leasehold.EnqueueOptions{Queue: "billing", Key: "acct", Delay: time.Hour})
		next := f.enqueue(chargeCard{Cents: 2}, &leasehold.EnqueueOptions{Queue: "billing", Key: "acct"})
		f.refusesRunningAndMissing("JobDelete", f.c.JobDelete)

		f.claimNone("billing")
		row, err := f.c.JobDelete(f.ctx, head)
		if err != nil || row.ID != head || row.State != leasehold.JobStatePending || string(row.Args) != `{"cents":1}` {
			t.Fatalf("JobDelete of the key's head = %+v, %v", row, err)
		}
		f.claim("billing", next)

		for _, id := range []int64{completed, dead, cancelled} {
			if _, err := f.c.JobDelete(f.ctx, id); err != nil {
				t.Fatal(err)
			}
			_, err := f.c.JobGet(f.ctx, id)
			wantOneLine(t, "JobGet of a deleted job", err, leasehold.ErrJobNotFound)
		}
		if s := f.stats("mail"); s.Completed != 0 || s.Dead != 0 || s.Cancelled != 0 {
			t.Fatalf("stats after deletes %+v, want nothing left", s)
		}
		_, err = f.c.JobDelete(f.ctx, completed)
		wantOneLine(t, "JobDelete of a job deleted before", err, leasehold.ErrJobNotFound)
	})
}
