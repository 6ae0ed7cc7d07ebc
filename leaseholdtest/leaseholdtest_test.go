package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

type SendEmail struct {
	To string `json:"to"`
}

func (SendEmail) Kind() string { return "send_email" }

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	if r.failed == "" {
		r.failed = fmt.Sprintf(format, args...)
	}
}

// newClient returns a memory store, closed at the test's end, and a client
// of it.
func newClient(t *testing.T) (*memory.Store, *leasehold.Client[store.NoTx]) {
	t.Helper()
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := leasehold.NewClient(st, leasehold.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st, c
}

func TestRequireEnqueued(t *testing.T) {
	ctx := context.Background()
	st, c := newClient(t)
	if _, err := c.Enqueue(ctx, SendEmail{To: "ann"}, &leasehold.EnqueueOptions{Queue: "mail", Key: "customer-1"}); err != nil {
		t.Fatal(err)
	}
	job := leaseholdtest.RequireEnqueued(ctx, t, st, SendEmail{To: "ann"}, &leaseholdtest.RequireOpts{Queue: "mail", Key: "customer-1"})
	if job.Args.To != "ann" || job.Kind != "send_email" || job.Key != "customer-1" {
		t.Fatalf("found %+v", job)
	}
	for _, tc := range []struct {
		args SendEmail
		opts *leaseholdtest.RequireOpts
	}{
		{SendEmail{To: "bob"}, &leaseholdtest.RequireOpts{Queue: "mail"}},
		{SendEmail{To: "ann"}, nil},
		{SendEmail{To: "ann"}, &leaseholdtest.RequireOpts{Queue: "mail", Key: "customer-2"}},
	} {
		r := &recorder{TB: t}
		leaseholdtest.RequireEnqueued(ctx, r, st, tc.args, tc.opts)
		if !strings.Contains(r.failed, "no send_email job") {
			t.Fatalf("RequireEnqueued(%+v, %+v) did not fail: %q", tc.args, tc.opts, r.failed)
		}
	}
}

// Without transactions (the memory store), RequireEnqueuedTx is
// RequireEnqueued, failures included.
func TestRequireEnqueuedTxMemory(t *testing.T) {
	ctx := context.Background()
	st, c := newClient(t)
	if _, err := c.EnqueueTx(ctx, store.NoTx{}, SendEmail{To: "ann"}, nil); err != nil {
		t.Fatal(err)
	}
	if job := leaseholdtest.RequireEnqueuedTx(ctx, t, st, store.NoTx{}, SendEmail{To: "ann"}, nil); job.Args.To != "ann" {
		t.Fatalf("found %+v", job)
	}
	r := &recorder{TB: t}
	leaseholdtest.RequireEnqueuedTx(ctx, r, st, store.NoTx{}, SendEmail{To: "bob"}, nil)
	if !strings.Contains(r.failed, "no send_email job") {
		t.Fatalf("a job never enqueued was found: %q", r.failed)
	}
	if rows := leaseholdtest.RequireManyEnqueuedTx(ctx, t, st, store.NoTx{}, []leaseholdtest.ExpectedJob{{Args: SendEmail{To: "ann"}}}); len(rows) != 1 {
		t.Fatalf("RequireManyEnqueuedTx = %+v", rows)
	}
	if failed := failsWith(t, func(tb testing.TB) {
		leaseholdtest.RequireManyEnqueuedTx(ctx, tb, st, store.NoTx{}, []leaseholdtest.ExpectedJob{{Args: SendEmail{To: "bob"}}})
	}); !strings.Contains(failed, "is not a send_email job") {
		t.Fatalf("RequireManyEnqueuedTx of a job never enqueued: %q", failed)
	}
}

func TestWorkRoundTripsArgs(t *testing.T) {
	type bad struct {
		SendEmail
		C chan int `json:"c"`
	}
	err := leaseholdtest.Work(context.Background(), func(ctx context.Context, job *leasehold.Job[SendEmail]) error {
		if job.Args.To != "ann" || job.Attempt != 1 || job.FencingToken != 1 || job.Queue != leasehold.DefaultQueue {
			return fmt.Errorf("job %+v", job)
		}
		return errors.New("handled")
	}, leaseholdtest.NewJob(SendEmail{To: "ann"}))
	if err == nil || err.Error() != "handled" {
		t.Fatalf("Work = %v, want the handler's result", err)
	}
	err = leaseholdtest.Work(context.Background(), func(ctx context.Context, job *leasehold.Job[bad]) error { return nil },
		leaseholdtest.NewJob(bad{C: make(chan int)}))
	if err == nil || !strings.Contains(err.Error(), "encode") {
		t.Fatalf("Work with args JSON cannot hold = %v, want an encoding error", err)
	}
}

func TestPostgresStore(t *testing.T) {
	st := leaseholdtest.PostgresStore(t, pgtest.DSN(t))
	if _, err := st.Stats(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
}

// A handler tested on its own, as the client would run it.
func Example_handlerTest() {
	send := func(ctx context.Context, job *leasehold.Job[SendEmail]) error {
		if job.Args.To == "" {
			return leasehold.Permanent(errors.New("no address"))
		}
		fmt.Println("sent to", job.Args.To, "with fencing token", job.FencingToken)
		return nil
	}
	job := leaseholdtest.NewJob(SendEmail{To: "ann@example.com"})
	job.FencingToken = 42
	fmt.Println(leaseholdtest.Work(context.Background(), send, job))
	// Output:
	// sent to ann@example.com with fencing token 42
	// <nil>
}

// A handler that outlasts its maximum processing time on a fake clock has
// its context cancelled with leasehold.ErrMaxProcessingTime, without the
// test waiting for the limit.
func TestWorkWithMaxProcessingTime(t *testing.T) {
	clk := clocktest.New()
	started := make(chan struct{})
	h := func(ctx context.Context, job *leasehold.Job[SendEmail]) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	}
	result := make(chan error, 1)
	go func() {
		result <- leaseholdtest.WorkWith(t.Context(), h, leaseholdtest.NewJob(SendEmail{To: "a@example.com"}),
			leaseholdtest.WorkConfig{Clock: clk, MaxProcessingTime: time.Minute})
	}()
	<-started
	clk.Advance(time.Minute - time.Nanosecond)
	select {
	case err := <-result:
		t.Fatalf("the handler ended before its limit: %v", err)
	default:
	}
	clk.Advance(time.Nanosecond)
	if err := <-result; !errors.Is(err, leasehold.ErrMaxProcessingTime) {
		t.Fatalf("WorkWith = %v, want ErrMaxProcessingTime", err)
	}
}

// A panic in the handler is the handler's error, not the test's crash.
func TestWorkRecoversPanic(t *testing.T) {
	h := func(ctx context.Context, job *leasehold.Job[SendEmail]) error { panic("no mail server") }
	err := leaseholdtest.Work(t.Context(), h, leaseholdtest.NewJob(SendEmail{}))
	if err == nil || !strings.Contains(err.Error(), "no mail server") {
		t.Fatalf("Work = %v, want the panic as an error", err)
	}
}

// Report is a kind with options of its own.
type Report struct {
	Day string `json:"day"`
}

func (Report) Kind() string { return "report" }

func (Report) EnqueueOpts() leasehold.EnqueueOptions {
	return leasehold.EnqueueOptions{Queue: "reports", Key: "reports", Priority: 7, MaxDeliveries: 2, Metadata: map[string]string{"team": "ops"}}
}

func (Report) WorkOpts() leasehold.WorkOptions {
	return leasehold.WorkOptions{MaxProcessingTime: time.Second}
}

// failsWith runs check on a recorder and returns what it failed with.
func failsWith(t *testing.T, check func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	check(r)
	return r.failed
}

// Each option narrows the search: queue (the kind's own by default),
// key, priority, delivery budget, scheduled time and state; a job that
// matches all of them is found, and one option off fails with the jobs
// of the kind listed.
func TestRequireOpts(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New()
	st, err := memory.New(memory.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := leasehold.NewClient(st, leasehold.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	runAt := clk.Now().Add(90 * time.Minute)
	if _, err := c.Enqueue(ctx, Report{Day: "mon"}, &leasehold.EnqueueOptions{RunAt: runAt}); err != nil {
		t.Fatal(err)
	}
	seven, eight := 7, 8
	if job := leaseholdtest.RequireEnqueued(ctx, t, st, Report{Day: "mon"}, &leaseholdtest.RequireOpts{Key: "reports", Priority: &seven,
		MaxDeliveries: 2, ScheduledAt: runAt, State: leasehold.JobStatePending}); job.Queue != "reports" || job.Metadata["team"] != "ops" {
		t.Fatalf("found %+v", job)
	}
	for name, opts := range map[string]*leaseholdtest.RequireOpts{
		"queue":          {Queue: "default"},
		"key":            {Key: "other"},
		"priority":       {Priority: &eight},
		"max deliveries": {MaxDeliveries: 3},
		"scheduled at":   {ScheduledAt: runAt.Add(time.Microsecond)},
		"state":          {State: leasehold.JobStateCompleted},
	} {
		if failed := failsWith(t, func(tb testing.TB) { leaseholdtest.RequireEnqueued(ctx, tb, st, Report{Day: "mon"}, opts) }); !strings.Contains(failed, "no report job") {
			t.Errorf("%s off: RequireEnqueued did not fail: %q", name, failed)
		}
		leaseholdtest.RequireNotEnqueued(ctx, t, st, Report{Day: "mon"}, opts)
	}
	if failed := failsWith(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(ctx, tb, st, Report{Day: "mon"}, &leaseholdtest.RequireOpts{State: "processing"})
	}); !strings.Contains(failed, `"processing" is not a job state`) {
		t.Errorf("an unknown state: %q", failed)
	}
}

// RequireNotEnqueued passes while no matching job is there and fails,
// naming the job, once one is.
func TestRequireNotEnqueued(t *testing.T) {
	ctx := context.Background()
	st, c := newClient(t)
	leaseholdtest.RequireNotEnqueued(ctx, t, st, SendEmail{To: "ann"}, nil)
	id, err := c.Enqueue(ctx, SendEmail{To: "ann"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaseholdtest.RequireNotEnqueued(ctx, t, st, SendEmail{To: "bob"}, nil)
	leaseholdtest.RequireNotEnqueuedTx(ctx, t, st, store.NoTx{}, SendEmail{To: "ann"}, &leaseholdtest.RequireOpts{Queue: "other"})
	failed := failsWith(t, func(tb testing.TB) { leaseholdtest.RequireNotEnqueued(ctx, tb, st, SendEmail{To: "ann"}, nil) })
	if !strings.Contains(failed, "want no send_email job") || !strings.Contains(failed, fmt.Sprintf("job %d:", id.ID)) {
		t.Fatalf("RequireNotEnqueued of an enqueued job: %q", failed)
	}
}

// RequireManyEnqueued wants exactly the expected jobs of their kinds, in
// enqueue order, each matching its options; jobs of other kinds do not
// count.
func TestRequireManyEnqueued(t *testing.T) {
	ctx := context.Background()
	st, c := newClient(t)
	if _, err := c.EnqueueMany(ctx, []leasehold.EnqueueParams{
		{Args: SendEmail{To: "ann"}},
		{Args: Report{Day: "mon"}},
		{Args: SendEmail{To: "bob"}, Options: &leasehold.EnqueueOptions{Priority: 3}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, other{}, nil); err != nil {
		t.Fatal(err)
	}
	three := 3
	rows := leaseholdtest.RequireManyEnqueued(ctx, t, st, []leaseholdtest.ExpectedJob{
		{Args: SendEmail{To: "ann"}},
		{Args: Report{Day: "mon"}, Opts: &leaseholdtest.RequireOpts{MaxDeliveries: 2}},
		{Args: SendEmail{To: "bob"}, Opts: &leaseholdtest.RequireOpts{Priority: &three}},
	})
	if len(rows) != 3 || rows[1].Queue != "reports" || rows[2].Priority != 3 || rows[0].State != leasehold.JobStatePending {
		t.Fatalf("rows %+v %+v %+v", rows[0], rows[1], rows[2])
	}
	for name, want := range map[string][]leaseholdtest.ExpectedJob{
		"one missing":   {{Args: SendEmail{To: "ann"}}, {Args: Report{Day: "mon"}}},
		"out of order":  {{Args: SendEmail{To: "bob"}}, {Args: Report{Day: "mon"}}, {Args: SendEmail{To: "ann"}}},
		"an option off": {{Args: SendEmail{To: "ann"}}, {Args: Report{Day: "mon"}}, {Args: SendEmail{To: "bob"}, Opts: &leaseholdtest.RequireOpts{Key: "k"}}},
		"one too many":  {{Args: SendEmail{To: "ann"}}, {Args: Report{Day: "mon"}}, {Args: SendEmail{To: "bob"}}, {Args: SendEmail{To: "cy"}}},
	} {
		failed := failsWith(t, func(tb testing.TB) { leaseholdtest.RequireManyEnqueued(ctx, tb, st, want) })
		if failed == "" || !strings.Contains(failed, "send_email {\"to\":\"bob\"}") {
			t.Errorf("%s: RequireManyEnqueued did not fail listing the jobs: %q", name, failed)
		}
	}
}

type other struct{}

func (other) Kind() string { return "other" }

// NewJob takes the kind's own options, and WorkWith its maximum
// processing time.
func TestNewJobTakesTheKindsOptions(t *testing.T) {
	job := leaseholdtest.NewJob(Report{Day: "mon"})
	if job.Queue != "reports" || job.Key != "reports" || job.Priority != 7 || job.MaxDeliveries != 2 || job.Metadata["team"] != "ops" {
		t.Fatalf("NewJob = %+v, want the kind's options", job)
	}
	clk := clocktest.New()
	started := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- leaseholdtest.WorkWith(t.Context(), func(ctx context.Context, _ *leasehold.Job[Report]) error {
			close(started)
			<-ctx.Done()
			return context.Cause(ctx)
		}, job, leaseholdtest.WorkConfig{Clock: clk})
	}()
	<-started
	clk.Advance(time.Second)
	if err := <-result; !errors.Is(err, leasehold.ErrMaxProcessingTime) {
		t.Fatalf("WorkWith = %v, want the kind's limit to end it", err)
	}
}
