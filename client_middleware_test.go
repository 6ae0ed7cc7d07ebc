package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/store"
)

// addMetadata is an enqueue hook that sets key to value.
func addMetadata(key, value string) leasehold.Middleware {
	return leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, p *leasehold.EnqueueParams, next func(context.Context) error) error {
		p.Options.Metadata[key] = value
		return next(ctx)
	})
}

// Metadata given at enqueue, and what middleware adds, reach the handler
// as they were, through Enqueue and EnqueueTx, on every store; a raw
// handler and leaseholdtest.RequireEnqueued see them too; the caller's map
// is left as it was.
func TestMetadataRoundTrips(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := clientOf(t, st, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}, "raw": {}},
			Middleware: []leasehold.Middleware{addMetadata("added", "by middleware")}})
		got := make(chan map[string]string, 3)
		leasehold.AddHandler(c, func(_ context.Context, job *leasehold.Job[sendEmail]) error {
			got <- job.Metadata
			return nil
		})
		c.HandleAny(func(_ context.Context, job *leasehold.RawJob) error {
			got <- job.Metadata
			return nil
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		given := map[string]string{"tenant": "acme", "requested_by": "ann 👩", "empty": ""}
		want := map[string]string{"tenant": "acme", "requested_by": "ann 👩", "empty": "", "added": "by middleware"}
		if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, &leasehold.EnqueueOptions{Metadata: given}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EnqueueTx(ctx, store.NoTx{}, sendEmail{To: "bob"}, &leasehold.EnqueueOptions{Metadata: given}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, unhandled{}, &leasehold.EnqueueOptions{Queue: "raw", Metadata: given}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if m := <-got; !maps.Equal(m, want) {
				t.Errorf("the handler got metadata %q, want %q", m, want)
			}
		}
		if len(given) != 3 {
			t.Errorf("the caller's metadata became %q", given)
		}
		if _, err := c.Enqueue(ctx, sendEmail{To: "cy"}, &leasehold.EnqueueOptions{Queue: "elsewhere", Metadata: given}); err != nil {
			t.Fatal(err)
		}
		job := leaseholdtest.RequireEnqueued(ctx, t, st, sendEmail{To: "cy"}, &leaseholdtest.RequireOpts{Queue: "elsewhere"})
		if !maps.Equal(job.Metadata, want) {
			t.Errorf("RequireEnqueued's job has metadata %q, want %q", job.Metadata, want)
		}
	})
}

type tagged struct{}

func (tagged) Kind() string { return "tagged" }

func (tagged) EnqueueOpts() leasehold.EnqueueOptions {
	return leasehold.EnqueueOptions{Metadata: map[string]string{"team": "billing"}}
}

// A kind's default metadata is taken when the enqueue gives none, and
// left when it gives some; a job without metadata stores none.
func TestMetadataDefaults(t *testing.T) {
	ctx := context.Background()
	st := memoryStore(t)
	c := clientOf(t, st, leasehold.Config{})
	for _, o := range []*leasehold.EnqueueOptions{nil, {Queue: "given", Metadata: map[string]string{"team": "ops"}}} {
		if _, err := c.Enqueue(ctx, tagged{}, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
		t.Fatal(err)
	}
	for queue, want := range map[string]string{"default": "billing", "given": "ops"} {
		if job := leaseholdtest.RequireEnqueued(ctx, t, st, tagged{}, &leaseholdtest.RequireOpts{Queue: queue}); job.Metadata["team"] != want {
			t.Errorf("queue %s: metadata %q, want team %s", queue, job.Metadata, want)
		}
	}
	infos, err := st.List(ctx, store.ListFilter{Queue: "default", State: store.Pending, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Kind == "send_email" && in.Attributes != nil {
			t.Errorf("a job without metadata stored attributes %q", in.Attributes)
		}
	}
}

// Metadata over its limits, or that JSON could not give back as it was, is
// refused with a one-line error naming the problem, and nothing is
// enqueued; so is metadata that middleware pushes over the limits, and
// the middleware's next returns the error.
func TestBadMetadataIsRefused(t *testing.T) {
	ctx := context.Background()
	st := memoryStore(t)
	many := map[string]string{}
	for i := range leasehold.MaxMetadataKeys + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	for _, tc := range []struct {
		name     string
		metadata map[string]string
		want     string
	}{
		{"too many keys", many, "metadata has 65 keys, at most 64 are allowed"},
		{"too large", map[string]string{"big": strings.Repeat("x", leasehold.MaxMetadataSize)}, "metadata takes 8215 bytes encoded, at most 8192 are allowed"},
		{"empty key", map[string]string{"": "v"}, "metadata has an empty key"},
		{"key not UTF-8", map[string]string{"\xff": "v"}, `metadata key "\xff" is not UTF-8`},
		{"value not UTF-8", map[string]string{"k": "\xfe"}, `metadata value of key "k" is not UTF-8`},
	} {
		_, err := clientOf(t, st, leasehold.Config{}).Enqueue(ctx, sendEmail{}, &leasehold.EnqueueOptions{Metadata: tc.metadata})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %q", tc.name, err, tc.want)
		}
	}
	var heard error
	full := maps.Clone(many)
	delete(full, "k0")
	c := clientOf(t, st, leasehold.Config{Middleware: []leasehold.Middleware{
		leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, _ *leasehold.EnqueueParams, next func(context.Context) error) error {
			heard = next(ctx)
			return heard
		}),
		addMetadata("traceparent", "00-..."),
	}})
	if _, err := c.Enqueue(ctx, sendEmail{}, &leasehold.EnqueueOptions{Metadata: full}); err == nil || !strings.Contains(err.Error(), "metadata has 65 keys") ||
		heard == nil || heard.Error() != err.Error() {
		t.Errorf("64 keys and one from middleware: %v; next returned %v", err, heard)
	}
	if s := count(t, st, "default"); s.Pending != 0 {
		t.Fatalf("%d jobs enqueued, want none", s.Pending)
	}
}

// Enqueue middleware run in order, the first outermost: each wraps the
// later ones, and after next returns sees the job's result
// (EnqueuedResult). One that refuses stops the enqueue: nothing is
// enqueued, the later ones do not run, the earlier ones' next returns the
// error, and the caller gets it, wrapped. The hook sees the job's options
// resolved, and what it changes in them is what is enqueued.
func TestEnqueueMiddleware(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		var calls []string
		refused := errors.New("tenant over quota")
		var saw leasehold.EnqueueParams
		hook := func(name string) leasehold.Middleware {
			return leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, p *leasehold.EnqueueParams, next func(context.Context) error) error {
				calls = append(calls, name)
				if name == "refuser" && p.Options.Metadata["tenant"] == "greedy" {
					return refused
				}
				if name == "first" {
					saw = *p
					saw.Options = new(*p.Options)
				}
				if name == "last" && p.Options.Queue == "reports" {
					p.Options.Priority++ // what the middleware leaves is enqueued
				}
				err := next(ctx)
				switch res := leasehold.EnqueuedResult(ctx); {
				case err != nil:
					calls = append(calls, name+" done: "+err.Error())
				default:
					calls = append(calls, fmt.Sprintf("%s done: id %d, duplicate %t", name, res.ID, res.Duplicate))
				}
				return err
			})
		}
		c := clientOf(t, st, leasehold.Config{Middleware: []leasehold.Middleware{hook("first"), hook("refuser"), hook("last")}})
		_, err := c.Enqueue(ctx, sendEmail{To: "ann"}, &leasehold.EnqueueOptions{Metadata: map[string]string{"tenant": "greedy"}})
		if !errors.Is(err, refused) || err.Error() != "leasehold: enqueue a send_email job: middleware 1 refused it: tenant over quota" {
			t.Fatalf("a refused enqueue returned %v", err)
		}
		if _, err := c.EnqueueTx(ctx, store.NoTx{}, sendEmail{To: "ann"}, &leasehold.EnqueueOptions{Metadata: map[string]string{"tenant": "greedy"}}); !errors.Is(err, refused) {
			t.Fatalf("a refused EnqueueTx returned %v", err)
		}
		if s := count(t, st, "default"); s.Pending != 0 {
			t.Fatalf("%d jobs enqueued after the refusals, want none", s.Pending)
		}
		// The outer middleware's next returns the refusal as the caller
		// gets it.
		wantRefused := []string{"first", "refuser", "first done: " + err.Error()}
		if !equalStrings(calls, append(wantRefused, wantRefused...)) {
			t.Fatalf("calls %q", calls)
		}
		calls = nil
		res, err := c.Enqueue(ctx, report{Day: "mon"}, &leasehold.EnqueueOptions{DedupID: "d", Priority: 3})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"first", "refuser", "last", fmt.Sprintf("last done: id %d, duplicate false", res.ID),
			fmt.Sprintf("refuser done: id %d, duplicate false", res.ID), fmt.Sprintf("first done: id %d, duplicate false", res.ID)}
		if !equalStrings(calls, want) {
			t.Fatalf("calls %q, want %q", calls, want)
		}
		if o := saw.Options; o.Queue != "reports" || o.Key != "reports" || o.MaxDeliveries != 2 || o.DedupID != "d" || o.Priority != 3 ||
			saw.Args.(report).Day != "mon" {
			t.Fatalf("the hook saw %+v, want the kind's options applied", o)
		}
		if row, err := c.JobGet(ctx, res.ID); err != nil || row.Priority != 4 {
			t.Fatalf("job %+v, %v: want the priority the last middleware set, 4", row, err)
		}
	})
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// Work middleware wrap the handler, the first outermost: each may derive
// the handler's context, sees the job (its metadata included) and the
// handler's result, panics included, and what it returns is what the
// client acts on; OutcomeOf names what becomes of the job.
func TestWorkMiddleware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		type ctxKey struct{}
		var mu sync.Mutex
		var seen []string
		snoozed := 0
		record := func(name string) leasehold.Middleware {
			return leasehold.WorkMiddlewareFunc(func(ctx context.Context, job *leasehold.JobRow, next func(context.Context) error) error {
				mu.Lock()
				seen = append(seen, name+" before "+job.Metadata["case"])
				mu.Unlock()
				err := next(context.WithValue(ctx, ctxKey{}, fmt.Sprint(ctx.Value(ctxKey{}), "/", name)))
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, fmt.Sprintf("%s after %s: attempt %d: %s: %v", name, job.Metadata["case"], job.Attempt, leasehold.OutcomeOf(ctx, job, err), err))
				if name == "outer" && job.Metadata["case"] == "forgiven" {
					return nil
				}
				return err
			})
		}
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {Concurrency: 1}},
			Middleware: []leasehold.Middleware{record("outer"), record("inner")}})
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			mu.Lock()
			seen = append(seen, "handler "+job.Metadata["case"]+" "+fmt.Sprint(ctx.Value(ctxKey{})))
			mu.Unlock()
			switch job.Metadata["case"] {
			case "failing", "forgiven":
				return errors.New("smtp down")
			case "panicking":
				panic("boom")
			case "snoozing":
				mu.Lock()
				defer mu.Unlock()
				if snoozed++; snoozed == 1 {
					return leasehold.Snooze(time.Minute)
				}
			case "permanent":
				return leasehold.Permanent(errors.New("no such mailbox"))
			}
			return nil
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		cases := []string{"fine", "failing", "forgiven", "panicking", "snoozing", "permanent"}
		for _, name := range cases {
			synctest.Wait() // one job at a time, for a log in order
			if _, err := c.Enqueue(ctx, sendEmail{To: name}, &leasehold.EnqueueOptions{MaxDeliveries: 2,
				Metadata: map[string]string{"case": name}}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, name+" settled", func() bool {
				s := count(t, st, "default")
				return s.Pending+s.Processing == 0
			})
		}
		want := map[string][]string{
			"fine":    {"attempt 1: completed: <nil>"},
			"failing": {"attempt 1: retried: smtp down", "attempt 2: dead: smtp down"},
			// The outer middleware forgives: the inner sees the failure,
			// the client the outer's nil.
			"forgiven":  {"attempt 1: retried: smtp down"},
			"panicking": {"attempt 1: retried: handler panicked: boom", "attempt 2: dead: handler panicked: boom"},
			"snoozing":  {"attempt 1: snoozed: snoozed for 1m0s", "attempt 1: completed: <nil>"},
			"permanent": {"attempt 1: dead: permanent: no such mailbox"},
		}
		mu.Lock()
		defer mu.Unlock()
		log := strings.Join(seen, "\n")
		for _, name := range cases {
			runs := 0
			for _, line := range seen {
				if line == "handler "+name+" <nil>/outer/inner" {
					runs++
				}
			}
			if runs != len(want[name]) {
				t.Errorf("%s: the handler ran %d times under both middleware's contexts, want %d; log:\n%s", name, runs, len(want[name]), log)
			}
			for _, w := range want[name] {
				for _, mw := range []string{"inner", "outer"} {
					if !strings.Contains(log, mw+" after "+name+": "+w) {
						t.Errorf("%s: no %q from %s; log:\n%s", name, w, mw, log)
					}
				}
			}
		}
		if s := count(t, st, "default"); s.Completed != 3 || s.Dead != 3 {
			t.Fatalf("%+v; want 3 completed (fine, forgiven, snoozing) and 3 dead", s)
		}
		if i, j := strings.Index(log, "outer before fine"), strings.Index(log, "inner before fine"); i < 0 || j < i ||
			strings.Index(log, "inner after fine") > strings.Index(log, "outer after fine") {
			t.Fatalf("not nested, outer first; log:\n%s", log)
		}
	})
}

// OutcomeOf reads the handler's context before its result: a cancelled
// job, a lost lease, a stop at shutdown and a run past its limit are named
// by the cause.
func TestOutcomeOfCauses(t *testing.T) {
	job := &leasehold.JobRow{Attempt: 1, MaxDeliveries: 1}
	failed := errors.New("failed")
	for _, tc := range []struct {
		cause error
		err   error
		want  leasehold.Outcome
	}{
		{nil, nil, leasehold.OutcomeCompleted},
		{leasehold.ErrCancelled, context.Canceled, leasehold.OutcomeCancelled},
		{store.ErrLeaseLost, nil, leasehold.OutcomeLeaseLost},
		{leasehold.ErrShutdown, context.Canceled, leasehold.OutcomeReleased},
		{leasehold.ErrShutdown, nil, leasehold.OutcomeCompleted},
		{leasehold.ErrMaxProcessingTime, nil, leasehold.OutcomeDead},
		{nil, failed, leasehold.OutcomeDead},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		if tc.cause != nil {
			cancel(tc.cause)
		}
		if got := leasehold.OutcomeOf(ctx, job, tc.err); got != tc.want {
			t.Errorf("cause %v, error %v: %s, want %s", tc.cause, tc.err, got, tc.want)
		}
		cancel(nil)
	}
	if got := leasehold.OutcomeOf(context.Background(), &leasehold.JobRow{Attempt: 1, MaxDeliveries: 2}, failed); got != leasehold.OutcomeRetried {
		t.Errorf("a failure with a delivery left: %s, want retried", got)
	}
}

// logLines collects a logger's lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

// A handler's panic under work middleware reaches the middleware as an
// error and is logged once, with its stack, as without middleware.
func TestPanicUnderMiddlewareIsLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memoryStore(t)
		var logs logLines
		var seen error
		c, err := leasehold.NewClient(st, leasehold.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Queues: map[string]leasehold.QueueConfig{"default": {}},
			Middleware: []leasehold.Middleware{leasehold.WorkMiddlewareFunc(func(ctx context.Context, job *leasehold.JobRow, next func(context.Context) error) error {
				seen = next(ctx)
				return seen
			})}})
		if err != nil {
			t.Fatal(err)
		}
		leasehold.AddHandler(c, func(context.Context, *leasehold.Job[sendEmail]) error { panic("boom") })
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, &leasehold.EnqueueOptions{MaxDeliveries: 1}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the job dead-lettered", func() bool { return count(t, st, "default").Dead == 1 })
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if seen == nil || seen.Error() != "handler panicked: boom" {
			t.Errorf("the middleware saw %v", seen)
		}
		logs.mu.Lock()
		defer logs.mu.Unlock()
		panics := 0
		for _, l := range logs.lines {
			if strings.Contains(l, `msg="handler panicked"`) && strings.Contains(l, "panic=boom") && strings.Contains(l, "stack=") {
				panics++
			}
		}
		if panics != 1 {
			t.Errorf("%d log lines of the panic, want 1:\n%s", panics, strings.Join(logs.lines, ""))
		}
	})
}

// EnqueueMany runs the enqueue middleware for each job of the batch, and
// each job's middleware sees its own result; a refused job refuses the
// batch, and the next of every job before it returns the error.
func TestEnqueueManyRunsMiddleware(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		var heard []string
		c := clientOf(t, st, leasehold.Config{Middleware: []leasehold.Middleware{addMetadata("tenant", "acme"),
			leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, p *leasehold.EnqueueParams, next func(context.Context) error) error {
				to := p.Args.(sendEmail).To
				if to == "refused" {
					return errors.New("no")
				}
				err := next(ctx)
				res := leasehold.EnqueuedResult(ctx)
				heard = append(heard, fmt.Sprintf("%s %v %v", to, res != nil && res.ID > 0, err != nil))
				return err
			})}})
		res, err := c.EnqueueMany(ctx, []leasehold.EnqueueParams{{Args: sendEmail{To: "a"}}, {Args: sendEmail{To: "b"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if row, err := c.JobGet(ctx, r.ID); err != nil || row.Metadata["tenant"] != "acme" {
				t.Fatalf("job %d of the batch: %+v, %v; want the middleware's metadata", r.ID, row, err)
			}
		}
		if _, err := c.EnqueueMany(ctx, []leasehold.EnqueueParams{{Args: sendEmail{To: "c"}}, {Args: sendEmail{To: "refused"}}}); err == nil ||
			!strings.Contains(err.Error(), "job at index 1 of 2") {
			t.Fatalf("a batch with a refused job: %v", err)
		}
		// Each job's middleware wraps the next job's: the last job's
		// finishes first.
		if want := []string{"b true false", "a true false", "c false true"}; !equalStrings(heard, want) {
			t.Fatalf("the middleware heard %q, want %q", heard, want)
		}
		if s := count(t, st, "default"); s.Pending != 2 {
			t.Fatalf("%d jobs pending, want the first batch's 2", s.Pending)
		}
	})
}

// An enqueue middleware may call next again after it returned an error
// (a retry): when a later call stores the job, the enqueue succeeds with
// its result rather than returning the earlier error over a stored job,
// and a call of next after the job was stored does not store it twice.
func TestEnqueueMiddlewareCallsNextAgain(t *testing.T) {
	ctx := context.Background()
	st := memoryStore(t)
	refusals := 1
	retry := leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, _ *leasehold.EnqueueParams, next func(context.Context) error) error {
		if err := next(ctx); err == nil {
			return nil
		}
		return next(ctx)
	})
	flaky := leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, _ *leasehold.EnqueueParams, next func(context.Context) error) error {
		if refusals > 0 {
			refusals--
			return errors.New("not yet")
		}
		return next(ctx)
	})
	c := clientOf(t, st, leasehold.Config{Middleware: []leasehold.Middleware{retry, flaky}})
	res, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil)
	if err != nil {
		t.Fatalf("an enqueue that a retry stored returned %v", err)
	}
	if s := count(t, st, "default"); s.Pending != 1 {
		t.Fatalf("%d jobs pending, want the one stored", s.Pending)
	}
	if row, err := c.JobGet(ctx, res.ID); err != nil || row.Kind != "send_email" {
		t.Fatalf("the result names %+v, %v", row, err)
	}

	twice := leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, _ *leasehold.EnqueueParams, next func(context.Context) error) error {
		if err := next(ctx); err != nil {
			return err
		}
		return next(ctx)
	})
	c = clientOf(t, st, leasehold.Config{Middleware: []leasehold.Middleware{twice}})
	if _, err := c.EnqueueMany(ctx, []leasehold.EnqueueParams{{Args: sendEmail{To: "bob"}}, {Args: sendEmail{To: "cy"}}}); err == nil {
		t.Fatal("a middleware that called next after the jobs were stored got no error")
	}
	if s := count(t, st, "default"); s.Pending != 3 {
		t.Fatalf("%d jobs pending, want 3: each job stored once", s.Pending)
	}
}

// A middleware's own error after its next stored the job reaches the
// caller as a failure after the enqueue, not as a refusal: the job is
// stored.
func TestEnqueueMiddlewareErrorAfterStore(t *testing.T) {
	ctx := context.Background()
	st := memoryStore(t)
	audit := errors.New("audit log unreachable")
	after := leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, _ *leasehold.EnqueueParams, next func(context.Context) error) error {
		if err := next(ctx); err != nil {
			return err
		}
		return audit
	})
	c := clientOf(t, st, leasehold.Config{Middleware: []leasehold.Middleware{after}})
	_, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil)
	if !errors.Is(err, audit) || strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "after the job was enqueued") {
		t.Fatalf("an error after the store call returned %v, want it named as after the enqueue", err)
	}
	if s := count(t, st, "default"); s.Pending != 1 {
		t.Fatalf("%d jobs pending, want the one stored", s.Pending)
	}
}

// ctxKey marks a context an enqueue middleware derived.
type ctxKey struct{}

// ctxStore records the value under ctxKey of the context each enqueue
// reaches the store under.
type ctxStore struct {
	store.Store
	saw []any
}

func (s *ctxStore) Enqueue(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
	s.saw = append(s.saw, ctx.Value(ctxKey{}))
	return s.Store.Enqueue(ctx, msgs)
}

// The store call runs under the context the enqueue middleware gave next
// (its deadline, its span), not under the one the enqueue was called
// with.
func TestEnqueueMiddlewareContextReachesTheStore(t *testing.T) {
	ctx := context.Background()
	st := &ctxStore{Store: memoryStore(t)}
	derive := leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, p *leasehold.EnqueueParams, next func(context.Context) error) error {
		return next(context.WithValue(ctx, ctxKey{}, p.Args.(sendEmail).To))
	})
	c := clientOf(t, st, leasehold.Config{Middleware: []leasehold.Middleware{derive}})
	if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueMany(ctx, []leasehold.EnqueueParams{{Args: sendEmail{To: "bob"}}, {Args: sendEmail{To: "cy"}}}); err != nil {
		t.Fatal(err)
	}
	if want := []any{"ann", "cy"}; fmt.Sprint(st.saw) != fmt.Sprint(want) {
		t.Fatalf("the store's enqueues saw %v, want %v: the context the (last job's) middleware gave next", st.saw, want)
	}
}
