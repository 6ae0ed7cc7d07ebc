package worker

import (
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of every leasehold instrument.
const meterName = "github.com/leasehold/leasehold/internal/worker"

func meter(p metric.MeterProvider) metric.Meter {
	if p == nil {
		p = otel.GetMeterProvider()
	}
	return p.Meter(meterName)
}

// instruments builds instruments and collects the first error of any.
type instruments struct {
	m   metric.Meter
	err error
}

func (b *instruments) counter(name, unit, desc string) metric.Int64Counter {
	c, err := b.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.err = errors.Join(b.err, err)
	return c
}

// durationBuckets are histogram boundaries in seconds, from 1 ms to 10 min.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

func (b *instruments) histogram(name, desc string) metric.Float64Histogram {
	h, err := b.m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	b.err = errors.Join(b.err, err)
	return h
}

// workerMetrics are a worker's instruments. Message counts carry the
// queue and the kind (see queueAttrs); extensions, made for every queue at
// once, carry only their result.
type workerMetrics struct {
	claimed, completed, failed, dead metric.Int64Counter
	duration                         metric.Float64Histogram
	inFlight                         metric.Int64UpDownCounter
	extensions                       metric.Int64Counter
	extOK, extLost, extError         metric.MeasurementOption
}

func newWorkerMetrics(p metric.MeterProvider) (*workerMetrics, error) {
	b := &instruments{m: meter(p)}
	wm := &workerMetrics{
		claimed:    b.counter("leasehold.messages.claimed", "{message}", "Messages claimed by the worker."),
		completed:  b.counter("leasehold.messages.completed", "{message}", "Messages completed by the worker."),
		failed:     b.counter("leasehold.messages.failed", "{message}", "Failed deliveries that will be retried."),
		dead:       b.counter("leasehold.messages.dead_lettered", "{message}", "Messages the worker dead-lettered."),
		duration:   b.histogram("leasehold.handler.duration", "How long handlers ran."),
		extensions: b.counter("leasehold.lease.extensions", "{lease}", "Lease extensions by result: ok (extended), error (the store call failed) or lost (a lease lost: refused by the store or expired before an extension succeeded)."),
	}
	var err error
	wm.inFlight, err = b.m.Int64UpDownCounter("leasehold.messages.in_flight", metric.WithUnit("{message}"),
		metric.WithDescription("Messages whose handler is running."))
	if err := errors.Join(b.err, err); err != nil {
		return nil, err
	}
	result := func(r string) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("result", r)))
	}
	wm.extOK, wm.extLost, wm.extError = result("ok"), result("lost"), result("error")
	return wm, nil
}

// queueAttrs are the attributes of one queue's measurements: the queue,
// and the kind of the message when it has one. The worker id stays out:
// it changes at every restart, and each value would start new series.
// Logs carry it.
type queueAttrs struct {
	queue  string
	noKind *kindAttrs
	kinds  sync.Map // kind -> *kindAttrs
}

// kindAttrs are the options of one kind's measurements, as the slices the
// instruments' variadic parameters take: passing them with ... allocates
// nothing, where a single option would be wrapped in a new slice on every
// call. They must not be modified.
type kindAttrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newKindAttrs(kvs ...attribute.KeyValue) *kindAttrs {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return &kindAttrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

func newQueueAttrs(queue string) *queueAttrs {
	return &queueAttrs{queue: queue, noKind: newKindAttrs(attribute.String("queue", queue))}
}

// of returns the attributes of a message of kind. Sets are built once per
// kind, so measuring allocates nothing.
func (a *queueAttrs) of(kind string) *kindAttrs {
	if kind == "" {
		return a.noKind
	}
	if o, ok := a.kinds.Load(kind); ok {
		return o.(*kindAttrs)
	}
	o, _ := a.kinds.LoadOrStore(kind, newKindAttrs(attribute.String("queue", a.queue), attribute.String("kind", kind)))
	return o.(*kindAttrs)
}

// reaperMetrics are the reaper's instruments. Recoveries carry the queue
// of the message recovered.
type reaperMetrics struct {
	recovered metric.Int64Counter
	stale     metric.Float64Histogram
	runs      metric.Int64Counter
}

func newReaperMetrics(p metric.MeterProvider) (*reaperMetrics, error) {
	b := &instruments{m: meter(p)}
	rm := &reaperMetrics{
		recovered: b.counter("leasehold.reaper.recovered", "{message}", "Messages the reaper took back from expired leases."),
		stale:     b.histogram("leasehold.reaper.stale.duration", "How long recovered messages had been stuck with an expired lease."),
		runs:      b.counter("leasehold.reaper.runs", "{run}", "Reaper runs."),
	}
	return rm, b.err
}
