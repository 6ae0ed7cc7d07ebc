package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// Deps are what every part of the runtime works with: the upkeep here,
// and the worker above it. Each is required; the runtime fills in none.
type Deps struct {
	// Store is the database worked on.
	Store store.Store
	// Clock times everything.
	Clock clock.Clock
	// Logger receives the logs.
	Logger *slog.Logger
	// Meter makes the instruments: Meter of the program's provider.
	Meter metric.Meter
}

// meterName is the instrumentation scope of every instrument of the
// runtime. It names the package the instruments were first made in, and
// stays so that dashboards that select on it go on working.
const meterName = "github.com/leasehold/leasehold/internal/worker"

// Meter returns the runtime's meter of p; a nil p is the global
// OpenTelemetry provider.
func Meter(p metric.MeterProvider) metric.Meter {
	if p == nil {
		p = otel.GetMeterProvider()
	}
	return p.Meter(meterName)
}

// Instruments makes instruments on Meter and keeps the first error of
// any, so that a set of them is checked once.
type Instruments struct {
	Meter metric.Meter
	Err   error
}

// Counter makes a counter.
func (b *Instruments) Counter(name, unit, desc string) metric.Int64Counter {
	c, err := b.Meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.Err = errors.Join(b.Err, err)
	return c
}

// durationBuckets are histogram boundaries in seconds, from 1 ms to 10 min.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Histogram makes a histogram of durations in seconds, from 1 ms to 10 min.
func (b *Instruments) Histogram(name, desc string) metric.Float64Histogram {
	h, err := b.Meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	b.Err = errors.Join(b.Err, err)
	return h
}

// Every calls f every interval on clk until ctx ends or stop is closed.
// A nil stop never closes.
func Every(ctx context.Context, clk clock.Clock, interval time.Duration, stop <-chan struct{}, f func()) {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C():
			f()
		}
	}
}
