package leaseholdotel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leaseholdotel"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/sqlite"
)

type greet struct {
	Name string `json:"name"`
}

func (greet) Kind() string { return "greet" }

// A failed greeting runs again at once.
func (greet) WorkOpts() leasehold.WorkOptions {
	return leasehold.WorkOptions{RetryDelay: func(int) time.Duration { return 0 }}
}

// backends are the stores the tracing runs on; PostgreSQL's is skipped
// without LEASEHOLD_TEST_POSTGRES_DSN.
var backends = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"memory", func(t *testing.T) store.Store {
		st, err := memory.New(memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"sqlite", func(t *testing.T) store.Store {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "otel.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"postgres", func(t *testing.T) store.Store { return leaseholdtest.PostgresStore(t, pgtest.DSN(t)) }},
}

// notifier sends each span that ends on a channel, so that a test waits
// for the spans it expects rather than for time to pass.
type notifier struct{ ended chan sdktrace.ReadOnlySpan }

func (n notifier) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (n notifier) OnEnd(s sdktrace.ReadOnlySpan)                   { n.ended <- s }
func (notifier) Shutdown(context.Context) error                    { return nil }
func (notifier) ForceFlush(context.Context) error                  { return nil }

// setup is what a tracing test needs: a tracer provider that records
// every span, and a way to wait for spans of a name to end.
type setup struct {
	tp       *sdktrace.TracerProvider
	recorder *tracetest.SpanRecorder
	ended    chan sdktrace.ReadOnlySpan
}

func newSetup(t *testing.T) *setup {
	s := &setup{recorder: tracetest.NewSpanRecorder(), ended: make(chan sdktrace.ReadOnlySpan, 100)}
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.recorder), sdktrace.WithSpanProcessor(notifier{s.ended}))
	t.Cleanup(func() { _ = s.tp.Shutdown(context.Background()) })
	return s
}

// waitEnded waits for n spans named name to end.
func (s *setup) waitEnded(t *testing.T, name string, n int) {
	t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for n > 0 {
		select {
		case sp := <-s.ended:
			if sp.Name() == name {
				n--
			}
		case <-timeout.C:
			t.Fatalf("%d more %q spans did not end within a minute", n, name)
		}
	}
}

func attrs(sp sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range sp.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A request's span, the enqueue of two jobs under it and every run of
// them, retries included, are one trace: each enqueue span is a child of
// the request's, each run's span a child of its job's enqueue span, and
// the spans the handler makes children of its run's. The spans carry the
// queue, the kind, the attempt and the outcome, and a failed run its
// error. A job enqueued without the middleware gets a trace of its own.
func TestOneTraceFromEnqueueToHandler(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st := store.WithoutTx(b.open(t))
			s := newSetup(t)
			app := s.tp.Tracer("app")
			mw := leaseholdotel.Middleware(leaseholdotel.Config{TracerProvider: s.tp, Propagator: propagation.TraceContext{}})
			c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet(), Middleware: []leasehold.Middleware{mw},
				Queues: map[string]leasehold.QueueConfig{"mail": {}}})
			if err != nil {
				t.Fatal(err)
			}
			traceparents := make(chan string, 10)
			leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[greet]) error {
				_, sp := app.Start(ctx, "greet "+job.Args.Name)
				defer sp.End()
				traceparents <- job.Metadata["traceparent"]
				if job.Args.Name == "bob" {
					return errors.New("bob is out")
				}
				return nil
			})
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer c.Stop(ctx)

			reqCtx, req := app.Start(ctx, "request")
			ann, err := c.Enqueue(reqCtx, greet{Name: "ann"}, &leasehold.EnqueueOptions{Queue: "mail"})
			if err != nil {
				t.Fatal(err)
			}
			bob, err := c.Enqueue(reqCtx, greet{Name: "bob"}, &leasehold.EnqueueOptions{Queue: "mail", MaxDeliveries: 2})
			if err != nil {
				t.Fatal(err)
			}
			req.End()
			s.waitEnded(t, "work greet", 3) // ann once, bob twice
			// A job enqueued without the middleware: no trace context.
			plain, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			cy, err := plain.Enqueue(ctx, greet{Name: "cy"}, &leasehold.EnqueueOptions{Queue: "mail"})
			if err != nil {
				t.Fatal(err)
			}
			s.waitEnded(t, "work greet", 1)

			traceID := req.SpanContext().TraceID()
			enqueueOf := map[string]sdktrace.ReadOnlySpan{}
			var works []sdktrace.ReadOnlySpan
			byName := map[string]sdktrace.ReadOnlySpan{}
			for _, sp := range s.recorder.Ended() {
				a := attrs(sp)
				id := a[leaseholdotel.AttrJobID].AsString()
				switch sp.Name() {
				case "enqueue greet":
					enqueueOf[id] = sp
				case "work greet":
					works = append(works, sp)
				default:
					byName[sp.Name()] = sp
				}
			}
			for _, job := range []*leasehold.EnqueueResult{ann, bob} {
				sp := enqueueOf[fmt.Sprint(job.ID)]
				if sp == nil || sp.SpanKind() != trace.SpanKindProducer || sp.Parent().SpanID() != req.SpanContext().SpanID() ||
					sp.SpanContext().TraceID() != traceID {
					t.Fatalf("job %d: enqueue span %v, want a producer span, child of the request's", job.ID, sp)
				}
				a := attrs(sp)
				if a["messaging.destination.name"].AsString() != "mail" || a[leaseholdotel.AttrKind].AsString() != "greet" || a[leaseholdotel.AttrDuplicate].AsBool() {
					t.Errorf("job %d: enqueue span attributes %v", job.ID, sp.Attributes())
				}
			}
			type run struct {
				job     int64
				attempt int64
				outcome string
			}
			var runs []run
			for _, sp := range works {
				a := attrs(sp)
				r := run{attempt: a[leaseholdotel.AttrAttempt].AsInt64(), outcome: a[leaseholdotel.AttrOutcome].AsString()}
				fmt.Sscan(a[leaseholdotel.AttrJobID].AsString(), &r.job)
				runs = append(runs, r)
				if sp.SpanKind() != trace.SpanKindConsumer || a["messaging.destination.name"].AsString() != "mail" || a[leaseholdotel.AttrKind].AsString() != "greet" {
					t.Errorf("job %d: work span %s %v", r.job, sp.SpanKind(), sp.Attributes())
				}
				if r.job == cy.ID {
					if sp.Parent().IsValid() || sp.SpanContext().TraceID() == traceID {
						t.Errorf("the untraced job's work span has parent %v in trace %v, want a root of its own", sp.Parent(), sp.SpanContext().TraceID())
					}
					continue
				}
				enq := enqueueOf[fmt.Sprint(r.job)]
				if sp.SpanContext().TraceID() != traceID || enq == nil || sp.Parent().SpanID() != enq.SpanContext().SpanID() {
					t.Errorf("job %d attempt %d: work span in trace %v with parent %v, want the request's trace and the job's enqueue span",
						r.job, r.attempt, sp.SpanContext().TraceID(), sp.Parent().SpanID())
				}
				failed := r.outcome != string(leasehold.OutcomeCompleted)
				if got := sp.Status().Code == codes.Error && len(sp.Events()) == 1 && sp.Events()[0].Name == "exception"; got != failed ||
					failed && !strings.Contains(sp.Status().Description, "bob is out") {
					t.Errorf("job %d attempt %d (%s): status %v, events %v", r.job, r.attempt, r.outcome, sp.Status(), sp.Events())
				}
			}
			want := map[run]bool{{ann.ID, 1, "completed"}: true, {bob.ID, 1, "retried"}: true, {bob.ID, 2, "dead"}: true, {cy.ID, 1, "completed"}: true}
			for _, r := range runs {
				if !want[r] {
					t.Errorf("run %+v not wanted", r)
				}
				delete(want, r)
			}
			if len(want) > 0 {
				t.Errorf("runs %+v missing", want)
			}
			// The handler's own spans are children of its run's.
			for _, name := range []string{"greet ann", "greet bob", "greet cy"} {
				sp := byName[name]
				if sp == nil || !sp.Parent().IsValid() {
					t.Fatalf("no %q span with a parent", name)
				}
				found := false
				for _, w := range works {
					found = found || w.SpanContext().SpanID() == sp.Parent().SpanID()
				}
				if !found {
					t.Errorf("%q's parent %v is no work span", name, sp.Parent().SpanID())
				}
			}
			close(traceparents)
			var seen []string
			for tp := range traceparents {
				seen = append(seen, tp)
			}
			for i, tp := range seen[:3] {
				if !strings.HasPrefix(tp, "00-"+traceID.String()+"-") {
					t.Errorf("handler %d saw traceparent %q, want one of trace %s", i, tp, traceID)
				}
			}
			if seen[3] != "" {
				t.Errorf("the untraced job carried traceparent %q", seen[3])
			}
		})
	}
}

// An enqueue span ends with the enqueue: a duplicate's names the first job
// and says so; one that a later middleware refused, or whose metadata the
// trace context pushed over the limit, carries the error.
func TestEnqueueSpanOutcomes(t *testing.T) {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := newSetup(t)
	refused := errors.New("closed for the night")
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet(), Middleware: []leasehold.Middleware{
		leaseholdotel.Middleware(leaseholdotel.Config{TracerProvider: s.tp, Propagator: propagation.TraceContext{}}),
		leasehold.EnqueueMiddlewareFunc(func(ctx context.Context, p *leasehold.EnqueueParams, next func(context.Context) error) error {
			if p.Options.Queue == "closed" {
				return refused
			}
			return next(ctx)
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Enqueue(ctx, greet{Name: "ann"}, &leasehold.EnqueueOptions{DedupID: "once"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, greet{Name: "ann"}, &leasehold.EnqueueOptions{DedupID: "once"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, greet{Name: "ann"}, &leasehold.EnqueueOptions{Queue: "closed"}); !errors.Is(err, refused) {
		t.Fatalf("refused enqueue: %v", err)
	}
	full := map[string]string{}
	for i := range leasehold.MaxMetadataKeys {
		full[fmt.Sprint("k", i)] = "v"
	}
	if _, err := c.Enqueue(ctx, greet{Name: "ann"}, &leasehold.EnqueueOptions{Metadata: full}); err == nil || !strings.Contains(err.Error(), "metadata has 65 keys") {
		t.Fatalf("an enqueue whose trace context is one key too many: %v", err)
	}
	spans := s.recorder.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	for i, sp := range spans {
		a := attrs(sp)
		var ok bool
		switch i {
		case 0, 1:
			ok = a[leaseholdotel.AttrJobID].AsString() == fmt.Sprint(first.ID) && a[leaseholdotel.AttrDuplicate].AsBool() == (i == 1) && sp.Status().Code == codes.Unset
		case 2:
			ok = sp.Status().Code == codes.Error && strings.Contains(sp.Status().Description, "closed for the night") && a["messaging.destination.name"].AsString() == "closed"
		case 3:
			ok = sp.Status().Code == codes.Error && strings.Contains(sp.Status().Description, "metadata has 65 keys")
		}
		if !ok {
			t.Errorf("span %d: %s %v %v", i, sp.Name(), sp.Status(), sp.Attributes())
		}
	}
	if n, _ := st.Stats(ctx, leasehold.DefaultQueue); n.Pending != 1 {
		t.Fatalf("%d jobs pending, want 1", n.Pending)
	}
}
