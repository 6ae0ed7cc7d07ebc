package maintenance

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/store"
)

// ObserveQueues registers gauges of the depth of queues, by state, and of
// the age of each one's oldest visible pending message. They are read
// with stats at each collection (StatsOf the queues a worker works);
// counting reads only live messages and a count of completed ones, never
// history. A meter provider keeps a bounded number of series per
// instrument (OpenTelemetry's SDK: 2,000 unless set with
// sdkmetric.WithCardinalityLimit) and folds the rest into one overflow
// series: each queue takes six, so a provider that exports more than
// 333 queues needs SeriesLimit. It returns the function that unregisters
// them.
func ObserveQueues(m metric.Meter, stats func(context.Context) ([]store.Stats, error)) (func() error, error) {
	depth, err1 := m.Int64ObservableGauge("leasehold.queue.depth", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs of a queue by state: pending, waiting (behind their key), processing, completed, dead, cancelled."))
	age, err2 := m.Float64ObservableGauge("leasehold.queue.oldest_pending_age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest visible pending job of a queue has waited."))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		// The queues that could be counted are observed even when some
		// could not.
		all, err := stats(ctx)
		for _, s := range all {
			q := attribute.String("queue", s.Queue)
			for state, n := range [store.States]int64{s.Pending, s.Waiting, s.Processing, s.Completed, s.Dead, s.Cancelled} {
				o.ObserveInt64(depth, n, metric.WithAttributes(q, attribute.String("state", store.State(state).String())))
			}
			o.ObserveFloat64(age, s.OldestPendingAge.Seconds(), metric.WithAttributes(q))
		}
		return err
	}, depth, age)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}

// SeriesLimit is the cardinality limit (sdkmetric.WithCardinalityLimit)
// a meter provider needs to keep a series for each state of queues
// queues in one instrument, and the SDK's default of 2,000 besides.
func SeriesLimit(queues int) int { return store.States*queues + 2000 }

// StatsOf returns a stats function for ObserveQueues that counts the given
// queues, one Stats each: for a worker, which works a few named queues.
func StatsOf(st store.Store, queues []string) func(context.Context) ([]store.Stats, error) {
	return func(ctx context.Context) ([]store.Stats, error) {
		out := make([]store.Stats, 0, len(queues))
		var errs []error
		for _, q := range queues {
			s, err := st.Stats(ctx, q)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, s)
		}
		return out, errors.Join(errs...)
	}
}
