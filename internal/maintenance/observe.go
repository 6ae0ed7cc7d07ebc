package maintenance

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/store"
)

// ObserveQueues registers gauges of the depth of queues, by state, and of
// the age of each one's oldest visible pending message. They are read from
// the store at each collection, for the queues that queues names then;
// counting reads only live messages and a count of completed ones, never
// history. It returns the function that unregisters them.
func ObserveQueues(m metric.Meter, st store.Store, queues func(context.Context) ([]string, error)) (func() error, error) {
	depth, err1 := m.Int64ObservableGauge("leasehold.queue.depth", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs of a queue by state: pending, waiting (behind their key), processing, completed, dead, cancelled."))
	age, err2 := m.Float64ObservableGauge("leasehold.queue.oldest_pending_age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest visible pending job of a queue has waited."))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		names, err := queues(ctx)
		if err != nil {
			return err
		}
		var errs []error
		for _, q := range names {
			s, err := st.Stats(ctx, q)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for state, n := range map[string]int64{"pending": s.Pending, "waiting": s.Waiting, "processing": s.Processing,
				"completed": s.Completed, "dead": s.Dead, "cancelled": s.Cancelled} {
				o.ObserveInt64(depth, n, metric.WithAttributes(attribute.String("queue", q), attribute.String("state", state)))
			}
			o.ObserveFloat64(age, s.OldestPendingAge.Seconds(), metric.WithAttributes(attribute.String("queue", q)))
		}
		return errors.Join(errs...)
	}, depth, age)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}
