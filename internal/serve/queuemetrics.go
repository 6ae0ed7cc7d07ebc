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
	depth := &dto.MetricFamily{Name: new(depthName), Help: new(depthHelp), Type: &gauge,
		Metric: make([]*dto.Metric, 0, len(all)*len(depthStates))}
	age := &dto.MetricFamily{Name: new(ageName), Help: new(ageHelp), Type: &gauge, Metric: make([]*dto.Metric, 0, len(all))}
	queueLabel, stateLabel := "queue", "state"
	stateNames := make([]string, store.States)
	for s := range store.States {
		stateNames[s] = store.State(s).String()
	}
	for _, s := range all {
		q := &dto.LabelPair{Name: &queueLabel, Value: new(s.Queue)}
		counts := [store.States]int64{s.Pending, s.Waiting, s.Processing, s.Completed, s.Dead, s.Cancelled}
		for _, state := range depthStates {
			depth.Metric = append(depth.Metric, &dto.Metric{
				Label: []*dto.LabelPair{q, {Name: &stateLabel, Value: &stateNames[state]}},
				Gauge: &dto.Gauge{Value: new(float64(counts[state]))}})
		}
		age.Metric = append(age.Metric, &dto.Metric{Label: []*dto.LabelPair{q},
			Gauge: &dto.Gauge{Value: new(s.OldestPendingAge.Seconds())}})
	}
	fams = append(fams, depth, age)
	slices.SortFunc(fams, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return fams, err
}
