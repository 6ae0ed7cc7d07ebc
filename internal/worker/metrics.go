package worker

import (
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/internal/maintenance"
)

// workerMetrics are a worker's instruments. Message counts carry the
// queue and the kind (see queueAttrs); extensions, made for every queue at
// once, carry only their result.
type workerMetrics struct {
	claimed, completed, failed, dead metric.Int64Counter
	snoozed, cancelled               metric.Int64Counter
	duration                         metric.Float64Histogram
	inFlight                         metric.Int64UpDownCounter
	extensions                       metric.Int64Counter
	extOK, extLost, extError         metric.MeasurementOption
}

func newWorkerMetrics(m metric.Meter) (*workerMetrics, error) {
	b := &maintenance.Instruments{Meter: m}
	wm := &workerMetrics{
		claimed:    b.Counter("leasehold.messages.claimed", "{message}", "Messages claimed by the worker."),
		completed:  b.Counter("leasehold.messages.completed", "{message}", "Messages completed by the worker."),
		failed:     b.Counter("leasehold.messages.failed", "{message}", "Failed deliveries that will be retried."),
		dead:       b.Counter("leasehold.messages.dead_lettered", "{message}", "Messages the worker dead-lettered."),
		snoozed:    b.Counter("leasehold.messages.snoozed", "{message}", "Messages their handler snoozed: given back to run later, the delivery not counted."),
		cancelled:  b.Counter("leasehold.messages.cancelled", "{message}", "Messages cancelled while their handler ran."),
		duration:   b.Histogram("leasehold.handler.duration", "How long handlers ran."),
		extensions: b.Counter("leasehold.lease.extensions", "{lease}", "Lease extensions by result: ok (extended), error (the store call failed) or lost (a lease lost: refused by the store or expired before an extension succeeded)."),
	}
	var err error
	wm.inFlight, err = m.Int64UpDownCounter("leasehold.messages.in_flight", metric.WithUnit("{message}"),
		metric.WithDescription("Messages whose handler is running."))
	if err := errors.Join(b.Err, err); err != nil {
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
