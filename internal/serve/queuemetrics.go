package serve

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// queueStatsTimeout bounds the counting of the queues for one scrape.
const queueStatsTimeout = 10 * time.Second

// queueMetrics gathers what reg holds and, beside it, every queue's depth
// by state and the age of its oldest visible pending message, counted
// with one AllStats per scrape. The queues' series are written straight
// into Prometheus's form: through OpenTelemetry's bridge, which hashes,
// converts and sorts each series, tens of thousands of queues took
// seconds a scrape. A failed count is logged and the scrape goes on
// without the queues' series.
type queueMetrics struct {
	reg prometheus.Gatherer
	st  store.Store
	clk clock.Clock
	log *slog.Logger
}

// Names and help texts of the queues' metrics.
const (
	depthName = "leasehold_queue_depth"
	depthHelp = "Jobs of a queue by state: pending, waiting (behind their key), processing, completed, dead, cancelled."
	ageName   = "leasehold_queue_oldest_pending_age_seconds"
	ageHelp   = "How long the oldest visible pending job of a queue has waited."
)

// depthStates are the states in the order of their names, the order in
// which a queue's series are written.
var depthStates = func() []store.State {
	s := []store.State{store.Pending, store.Waiting, store.Processing, store.Completed, store.Dead, store.Cancelled}
	slices.SortFunc(s, func(a, b store.State) int { return cmp.Compare(a.String(), b.String()) })
	return s
}()

func (g queueMetrics) Gather() ([]*dto.MetricFamily, error) {
	fams, err := g.reg.Gather()
	ctx, cancel := clock.WithTimeout(context.Background(), g.clk, queueStatsTimeout)
	defer cancel()
	all, serr := g.st.AllStats(ctx)
	if serr != nil {
		g.log.Warn("metrics: could not count the queues", "error", serr)
		return fams, err
	}
	gauge := dto.MetricType_GAUGE
	n := len(all) * (len(depthStates) + 1)
	depth := &dto.MetricFamily{Name: new(depthName), Help: new(depthHelp), Type: &gauge, Metric: make([]*dto.Metric, 0, n-len(all))}
	age := &dto.MetricFamily{Name: new(ageName), Help: new(ageHelp), Type: &gauge, Metric: make([]*dto.Metric, 0, len(all))}
	// The series are cut from a few large blocks, not allocated one by
	// one: there may be a hundred thousand of them.
	metrics, gauges, values := make([]dto.Metric, n), make([]dto.Gauge, n), make([]float64, n)
	queueLabels, labels := make([]dto.LabelPair, len(all)), make([]*dto.LabelPair, 0, n+len(all)*len(depthStates))
	queueLabel, stateLabel := "queue", "state"
	stateLabels := make([]dto.LabelPair, store.States)
	for s := range store.States {
		stateLabels[s] = dto.LabelPair{Name: &stateLabel, Value: new(store.State(s).String())}
	}
	i := 0
	series := func(v float64, ls ...*dto.LabelPair) *dto.Metric {
		values[i] = v
		gauges[i].Value = &values[i]
		start := len(labels)
		labels = append(labels, ls...)
		metrics[i].Label, metrics[i].Gauge = labels[start:len(labels):len(labels)], &gauges[i]
		i++
		return &metrics[i-1]
	}
	for j, s := range all {
		q := &queueLabels[j]
		q.Name, q.Value = &queueLabel, &all[j].Queue
		counts := [store.States]int64{s.Pending, s.Waiting, s.Processing, s.Completed, s.Dead, s.Cancelled}
		for _, state := range depthStates {
			depth.Metric = append(depth.Metric, series(float64(counts[state]), q, &stateLabels[state]))
		}
		age.Metric = append(age.Metric, series(s.OldestPendingAge.Seconds(), q))
	}
	if len(all) > 0 {
		// A family without series is refused by the text encoder, which
		// would end the scrape there, after its 200.
		fams = append(fams, depth, age)
	}
	slices.SortFunc(fams, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return fams, err
}
