package leaseholdotel_test

import (
	"context"
	"fmt"
	"log"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdotel"
	"github.com/leasehold/leasehold/store/memory"
)

// A request enqueues a job; its run is in the request's trace, a child of
// the job's enqueue span. A program would install its own tracer provider
// and propagator globally (otel.SetTracerProvider,
// otel.SetTextMapPropagator) and pass leaseholdotel.Config{}.
func Example() {
	ctx := context.Background()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	st, err := memory.New(memory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet(),
		Middleware: []leasehold.Middleware{leaseholdotel.Middleware(leaseholdotel.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})},
		Queues:     map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {}}})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[greet]) error {
		close(done)
		return nil
	})
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	reqCtx, req := tp.Tracer("app").Start(ctx, "request")
	if _, err := c.Enqueue(reqCtx, greet{Name: "ann"}, nil); err != nil {
		log.Fatal(err)
	}
	req.End()
	<-done
	c.Stop(ctx) // the run's span ends before Stop returns
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range recorder.Ended() {
		spans[sp.Name()] = sp
		if outcome, ok := attrs(sp)[leaseholdotel.AttrOutcome]; ok {
			fmt.Println(sp.Name(), sp.SpanKind(), outcome.AsString())
		} else {
			fmt.Println(sp.Name(), sp.SpanKind())
		}
	}
	work, enqueue := spans["work greet"], spans["enqueue greet"]
	fmt.Println("one trace:", work.SpanContext().TraceID() == req.SpanContext().TraceID())
	fmt.Println("work's parent is the enqueue span:", work.Parent().SpanID() == enqueue.SpanContext().SpanID())
	// Unordered output:
	// request internal
	// enqueue greet producer
	// work greet consumer completed
	// one trace: true
	// work's parent is the enqueue span: true
}
