// Package leaseholdotel traces leasehold jobs with OpenTelemetry: a
// leasehold.Middleware that makes a producer span for each enqueue and a
// consumer span for each run of a handler, and carries the trace from one
// to the other in the job's metadata, so that a job's runs belong to the
// trace of the code that enqueued it, in whatever process they run.
//
// At enqueue, the producer span ("enqueue KIND") is a child of the span in
// the enqueue's context, if any; the propagator writes its context into
// the job's metadata (W3C Trace Context: the keys traceparent and, when
// there is one, tracestate). At each run, the consumer span ("work KIND")
// is a child of that producer span: a job and all its runs, retries
// included, are one trace, whose root is the enqueuer's. A job enqueued
// without a trace context in its metadata (by another program, or through
// the SQS API) gets a consumer span at the root of a trace of its own.
// The handler's context carries the consumer span, so the spans the
// handler makes are its children. An enqueue in the caller's transaction
// (EnqueueTx) ends its span once the job is written in the transaction: a
// rollback leaves the span of a job that never runs.
//
// The package uses the OpenTelemetry API only: spans go to the tracer
// provider the program installs (otel.SetTracerProvider, or
// Config.TracerProvider), and nothing is recorded without one. The
// propagator defaults to the global one (otel.SetTextMapPropagator), which
// is a no-op until the program installs one: install
// propagation.TraceContext{} there, or pass it as Config.Propagator, or
// no trace context is carried and each run starts a trace of its own.
package leaseholdotel

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
)

// ScopeName is the instrumentation scope of the tracer that makes the
// spans.
const ScopeName = "github.com/leasehold/leasehold/leaseholdotel"

// Attributes the spans carry, besides messaging.system ("leasehold"),
// messaging.operation.type ("send" or "process") and
// messaging.destination.name (the job's queue).
const (
	// AttrJobID is the job's id: at work, and at enqueue once the store
	// gave one.
	AttrJobID = attribute.Key("messaging.message.id")
	// AttrKind is the job's kind.
	AttrKind = attribute.Key("leasehold.job.kind")
	// AttrAttempt counts the job's deliveries, this run's included (work
	// spans).
	AttrAttempt = attribute.Key("leasehold.job.attempt")
	// AttrOutcome is what became of the job after the run
	// (leasehold.OutcomeOf: completed, retried, dead, snoozed, cancelled,
	// released, lease_lost) on work spans.
	AttrOutcome = attribute.Key("leasehold.job.outcome")
	// AttrDuplicate is true on an enqueue span whose job was a duplicate
	// of one enqueued earlier (its dedup id): the job id is the earlier
	// job's, and nothing new was enqueued.
	AttrDuplicate = attribute.Key("leasehold.job.duplicate")
)

// Config configures the middleware. The zero value uses the global
// tracer provider and propagator.
type Config struct {
	// TracerProvider makes the spans. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator writes a span's context into a job's metadata at enqueue
	// and reads it at work. Default otel.GetTextMapPropagator(), a no-op
	// until the program sets one. Whatever keys it writes count toward
	// the metadata's limits (leasehold.MaxMetadataKeys, MaxMetadataSize):
	// a job whose metadata they push over is refused.
	Propagator propagation.TextMapPropagator
}

// Middleware returns the tracing middleware. Put it first in
// leasehold.Config.Middleware, so that its spans take in the other
// middleware and its outcome is the one the client acts on.
func Middleware(cfg Config) leasehold.Middleware {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &tracer{tracer: tp.Tracer(ScopeName), prop: cfg.Propagator}
}

type tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// propagator is the configured propagator, or the global one as it is now:
// a program may install it after it made the middleware.
func (t *tracer) propagator() propagation.TextMapPropagator {
	if t.prop != nil {
		return t.prop
	}
	return otel.GetTextMapPropagator()
}

var systemAttr = attribute.String("messaging.system", "leasehold")

// Enqueue starts the job's producer span, writes its context into the
// job's metadata, and ends it with the enqueue's result.
func (t *tracer) Enqueue(ctx context.Context, params *leasehold.EnqueueParams, next func(context.Context) error) error {
	kind := params.Args.Kind()
	ctx, span := t.tracer.Start(ctx, "enqueue "+kind, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(systemAttr, attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", params.Options.Queue), AttrKind.String(kind)))
	defer span.End()
	t.propagator().Inject(ctx, propagation.MapCarrier(params.Options.Metadata))
	err := next(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else if res := leasehold.EnqueuedResult(ctx); res != nil {
		span.SetAttributes(AttrJobID.String(strconv.FormatInt(res.ID, 10)), AttrDuplicate.Bool(res.Duplicate))
	}
	return err
}

// Work runs the job's handler under its consumer span, a child of the
// producer span whose context the job's metadata carries.
func (t *tracer) Work(ctx context.Context, job *leasehold.JobRow, next func(context.Context) error) error {
	ctx = t.propagator().Extract(ctx, propagation.MapCarrier(job.Metadata))
	ctx, span := t.tracer.Start(ctx, "work "+job.Kind, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(systemAttr, attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", job.Queue), AttrKind.String(job.Kind),
			AttrJobID.String(strconv.FormatInt(job.ID, 10)), AttrAttempt.Int(job.Attempt)))
	defer span.End()
	err := next(ctx)
	outcome := leasehold.OutcomeOf(ctx, job, err)
	span.SetAttributes(AttrOutcome.String(string(outcome)))
	switch outcome {
	case leasehold.OutcomeRetried, leasehold.OutcomeDead, leasehold.OutcomeLeaseLost:
		// A run stopped past its limit may have returned nil: the
		// context says why it failed.
		failure := err
		if failure == nil {
			failure = context.Cause(ctx)
		}
		span.RecordError(failure)
		span.SetStatus(codes.Error, failure.Error())
	}
	return err
}
