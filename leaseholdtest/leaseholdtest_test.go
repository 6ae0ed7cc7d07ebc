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
