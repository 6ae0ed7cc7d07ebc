package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store"
)

// EnqueueMany's results are in input order, each naming its job; a dedup
// id repeated within the batch, and one of a job enqueued before it, are
// duplicates naming the first job. The jobs are stored as Enqueue stores
// them, in input order.
func TestEnqueueManyResults(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := clientOf(t, st, leasehold.Config{})
		early, err := c.Enqueue(ctx, sendEmail{To: "early"}, &leasehold.EnqueueOptions{DedupID: "early"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.EnqueueMany(ctx, []leasehold.EnqueueParams{
			{Args: sendEmail{To: "ann"}, Options: &leasehold.EnqueueOptions{DedupID: "x"}},
			{Args: sendEmail{To: "bob"}},
			{Args: sendEmail{To: "ann again"}, Options: &leasehold.EnqueueOptions{DedupID: "x"}},
			{Args: sendEmail{To: "early again"}, Options: &leasehold.EnqueueOptions{DedupID: "early"}},
			{Args: chargeCard{Cents: 5}, Options: &leasehold.EnqueueOptions{Priority: 3}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 5 {
			t.Fatalf("%d results for 5 jobs", len(res))
		}
		a, b, e := res[0].ID, res[1].ID, res[4].ID
		if res[0].Duplicate || res[1].Duplicate || res[4].Duplicate || !(early.ID < a && a < b && b < e) {
			t.Fatalf("results %+v %+v %+v after job %d: want three new jobs with increasing ids", res[0], res[1], res[4], early.ID)
		}
		if res[2] != (leasehold.EnqueueResult{ID: a, Duplicate: true}) || res[3] != (leasehold.EnqueueResult{ID: early.ID, Duplicate: true}) {
			t.Fatalf("results %+v and %+v, want duplicates of %d (in the batch) and %d (before it)", res[2], res[3], a, early.ID)
		}
		infos, err := st.List(ctx, store.ListFilter{Queue: leasehold.DefaultQueue, State: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, in := range infos {
			got = append(got, in.Kind+" "+string(in.Payload))
		}
		want := `send_email {"to":"early"},send_email {"to":"ann"},send_email {"to":"bob"},charge_card {"cents":5}`
		if strings.Join(got, ",") != want {
			t.Fatalf("stored %q, want %q", got, want)
		}
		if infos[3].ID != e || infos[3].Priority != 3 {
			t.Fatalf("the last job stored as %+v, want job %d with priority 3", infos[3], e)
		}
		if none, err := c.EnqueueMany(ctx, nil); err != nil || len(none) != 0 {
			t.Fatalf("EnqueueMany of no jobs = %v, %v; want no results and no error", none, err)
		}
	})
}

// The jobs of a key in one batch run one at a time, in input order,
// beside the batch's other jobs.
func TestEnqueueManyKeyOrder(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := clientOf(t, st, leasehold.Config{})
		var params []leasehold.EnqueueParams
		for _, to := range []string{"k1", "k2", "free", "k3", "k4"} {
			p := leasehold.EnqueueParams{Args: sendEmail{To: to}}
			if to != "free" {
				p.Options = &leasehold.EnqueueOptions{Key: "K"}
			}
			params = append(params, p)
		}
		if _, err := c.EnqueueMany(ctx, params); err != nil {
			t.Fatal(err)
		}
		// Each claim takes what is ready, and completes it before the next.
		var rounds []string
		for len(rounds) < 10 {
			ds, err := st.Claim(ctx, store.Claim{Queue: leasehold.DefaultQueue, WorkerID: "w", Max: 10, LeaseDuration: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 0 {
				break
			}
			var round []string
			var done []store.Completion
			for _, d := range ds {
				round = append(round, string(d.Payload))
				done = append(done, store.Completion{Lease: d.Lease})
			}
			rounds = append(rounds, strings.Join(round, " "))
			if _, err := st.Complete(ctx, done); err != nil {
				t.Fatal(err)
			}
		}
		got := strings.Join(rounds, " | ")
		want := `{"to":"k1"} {"to":"free"} | {"to":"k2"} | {"to":"k3"} | {"to":"k4"}`
		if got != want {
			t.Fatalf("claims took %s, want %s", got, want)
		}
	})
}

// A batch with a bad job anywhere enqueues nothing, and its error is one
// line naming the job's index, whether the client or the store refuses
// it; so is a batch over the limit.
func TestEnqueueManyRefused(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := clientOf(t, st, leasehold.Config{})
		good := func(to string) leasehold.EnqueueParams {
			return leasehold.EnqueueParams{Args: sendEmail{To: to}, Options: &leasehold.EnqueueOptions{Key: "K", DedupID: to}}
		}
		for _, tc := range []struct {
			name   string
			params []leasehold.EnqueueParams
			want   string
		}{
			{"nil args first", []leasehold.EnqueueParams{{}, good("a"), good("b")}, "job at index 0 of 3: enqueue: the job args are nil"},
			{"Delay and RunAt in the middle",
				[]leasehold.EnqueueParams{good("a"), {Args: sendEmail{To: "b"}, Options: &leasehold.EnqueueOptions{Delay: time.Minute, RunAt: time.Now()}}, good("c")},
				"job at index 1 of 3: enqueue a send_email job: both Delay (1m0s) and RunAt"},
			{"priority out of range, last", []leasehold.EnqueueParams{good("a"), good("b"), {Args: chargeCard{}, Options: &leasehold.EnqueueOptions{Priority: 1001}}},
				"job at index 2 of 3: enqueue a charge_card job: invalid argument: priority is 1001"},
			{"a key over the limit, alone", []leasehold.EnqueueParams{{Args: chargeCard{}, Options: &leasehold.EnqueueOptions{Key: strings.Repeat("k", store.MaxNameLength+1)}}},
				"job at index 0 of 1: enqueue a charge_card job: invalid argument: key is 256 bytes"},
			{"over the limit", make([]leasehold.EnqueueParams, store.MaxBatch+1),
				"enqueue many: 10001 jobs, the limit is 10000 a call (store.MaxBatch)"},
		} {
			res, err := c.EnqueueMany(ctx, tc.params)
			if err == nil || !strings.HasPrefix(err.Error(), "leasehold: "+tc.want) || strings.Contains(err.Error(), "\n") || res != nil {
				t.Errorf("%s: %v, %v; want one line starting %q", tc.name, res, err, "leasehold: "+tc.want)
			}
		}
		if s := count(t, st, leasehold.DefaultQueue); s.Pending+s.Waiting != 0 {
			t.Fatalf("after refused batches: %+v, want nothing enqueued", s)
		}
		// The refused batches took none of their dedup ids.
		res, err := c.EnqueueMany(ctx, []leasehold.EnqueueParams{good("a"), good("b")})
		if err != nil || res[0].Duplicate || res[1].Duplicate {
			t.Fatalf("the good jobs alone: %+v, %v; want two new jobs", res, err)
		}
	})
}

// A job the store refuses fails the batch with the store's reason, for
// errors.Is.
func TestEnqueueManyRefusalWrapsInvalid(t *testing.T) {
	c := clientOf(t, memoryStore(t), leasehold.Config{})
	_, err := c.EnqueueMany(context.Background(), []leasehold.EnqueueParams{{Args: sendEmail{}}, {Args: sendEmail{}, Options: &leasehold.EnqueueOptions{Priority: -1001}}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a priority out of range: %v, want store.ErrInvalid", err)
	}
}

// testEnqueueManyTx enqueues a batch in a transaction that commits and
// the same batch in one that rolls back: each transaction sees its jobs,
// outside sees none until the commit, and only the first batch is there
// afterwards. In the second transaction the dedup id is a duplicate of
// the committed job.
func testEnqueueManyTx[TTx any](t *testing.T, c *leasehold.Client[TTx], lister store.TxLister[TTx], outside store.Store, begin func() (TTx, func(commit bool) error)) {
	t.Helper()
	ctx := context.Background()
	params := []leasehold.EnqueueParams{
		{Args: sendEmail{To: "ann"}, Options: &leasehold.EnqueueOptions{Key: "K"}},
		{Args: sendEmail{To: "bob"}, Options: &leasehold.EnqueueOptions{Key: "K"}},
		{Args: sendEmail{To: "cy"}, Options: &leasehold.EnqueueOptions{DedupID: "cy"}},
	}
	live := func(list func(f store.ListFilter) ([]store.Info, error)) []int64 {
		t.Helper()
		var ids []int64
		for _, state := range []store.State{store.Pending, store.Waiting} {
			infos, err := list(store.ListFilter{Queue: leasehold.DefaultQueue, State: state})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				ids = append(ids, in.ID)
			}
		}
		return ids
	}
	seen := func() []int64 {
		return live(func(f store.ListFilter) ([]store.Info, error) { return outside.List(ctx, f) })
	}
	var committed []leasehold.EnqueueResult
	for _, commit := range []bool{true, false} {
		tx, end := begin()
		res, err := c.EnqueueManyTx(ctx, tx, params)
		if err != nil {
			t.Fatal(err)
		}
		inside := live(func(f store.ListFilter) ([]store.Info, error) { return lister.ListTx(ctx, tx, f) })
		if commit {
			committed = res
			if len(inside) != 3 || res[0].Duplicate || res[1].Duplicate || res[2].Duplicate {
				t.Fatalf("in the transaction: results %+v %+v %+v, jobs %v; want three new jobs", res[0], res[1], res[2], inside)
			}
		} else if len(inside) != 5 || res[2] != (leasehold.EnqueueResult{ID: committed[2].ID, Duplicate: true}) || res[0].Duplicate || res[1].Duplicate {
			t.Fatalf("in the second transaction: results %+v %+v %+v, jobs %v; want two new jobs and a duplicate of %d", res[0], res[1], res[2], inside, committed[2].ID)
		}
		if ids := seen(); commit && len(ids) != 0 || !commit && len(ids) != 3 {
			t.Fatalf("outside the open transaction (commit %v): jobs %v, want only those committed before it", commit, ids)
		}
		if err := end(commit); err != nil {
			t.Fatal(err)
		}
	}
	ids := seen()
	if len(ids) != 3 || ids[0] != committed[0].ID || ids[1] != committed[2].ID || ids[2] != committed[1].ID {
		t.Fatalf("after a commit and a rollback: pending and waiting %v, want the committed %d, %d and then %d waiting", ids,
			committed[0].ID, committed[2].ID, committed[1].ID)
	}
}

func TestEnqueueManyTxSQLite(t *testing.T) {
	c, st, other := txSQLite(t)
	testEnqueueManyTx(t, c, st, other, sqlBegin(t, st.DB()))
}

func TestEnqueueManyTxPostgres(t *testing.T) {
	c, st, pool := txPostgres(t)
	testEnqueueManyTx(t, c, st, st, pgxBegin(t, pool))
}
