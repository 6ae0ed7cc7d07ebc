package maintenance_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/metrictest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

const queue = "jobs"

// deps are the dependencies of the runtime on st and clk (nil: the
// system's, or the bubble's), with a quiet logger and the global meter.
func deps(st store.Store, clk clock.Clock) maintenance.Deps {
	return maintenance.Deps{Store: st, Clock: clock.OrSystem(clk), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Meter: maintenance.Meter(nil)}
}

// metered are deps whose meter reports to reader.
func metered(d maintenance.Deps, reader *sdkmetric.ManualReader) maintenance.Deps {
	d.Meter = maintenance.Meter(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	return d
}

// newStore returns a memory store on clk (nil: the bubble's, or the
// system's), closed when the test ends.
func newStore(t *testing.T, clk clock.Clock) store.Store {
	t.Helper()
	st, err := memory.New(memory.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestReaperMetrics(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New()
	st := newStore(t, clk)
	reader := sdkmetric.NewManualReader()
	r, err := maintenance.NewReaper(maintenance.ReaperConfig{Deps: metered(deps(st, clk), reader)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: queue}, {Queue: queue, MaxDeliveries: 1}, {Queue: queue}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, store.Claim{Queue: queue, WorkerID: "gone", Max: 2, LeaseDuration: time.Second}); err != nil {
		t.Fatal(err)
	}
	if rec, err := r.RunOnce(ctx); err != nil || len(rec) != 0 {
		t.Fatalf("reap before expiry: %v, %v", rec, err)
	}
	clk.Advance(4 * time.Second)
	rec, err := r.RunOnce(ctx)
	if err != nil || len(rec) != 2 {
		t.Fatalf("reap after expiry: %v, %v", rec, err)
	}
	data := metrictest.Collect(t, reader)
	if got := metrictest.Sum(t, data, "leasehold.reaper.runs"); got != 2 {
		t.Fatalf("leasehold.reaper.runs = %d, want 2", got)
	}
	if got := metrictest.Sum(t, data, "leasehold.reaper.recovered"); got != 2 {
		t.Fatalf("leasehold.reaper.recovered = %d, want 2", got)
	}
	h, ok := data["leasehold.reaper.stale.duration"].(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("leasehold.reaper.stale.duration: %#v", data["leasehold.reaper.stale.duration"])
	}
	if dp := h.DataPoints[0]; dp.Count != 2 || dp.Sum != 6 {
		t.Fatalf("stale durations: count %d sum %v, want 2 and 6 s (each stuck 3 s)", dp.Count, dp.Sum)
	}
	if q, _ := h.DataPoints[0].Attributes.Value("queue"); q.AsString() != queue {
		t.Fatalf("stale durations of queue %q, want %q", q.AsString(), queue)
	}
}

func TestReaperRunsOnItsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t, nil)
		reader := sdkmetric.NewManualReader()
		r, err := maintenance.NewReaper(maintenance.ReaperConfig{Deps: metered(deps(st, nil), reader), Interval: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- r.Run(context.Background()) }()
		time.Sleep(9 * time.Second)
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := metrictest.Sum(t, metrictest.Collect(t, reader), "leasehold.reaper.runs"); got != 4 {
			t.Fatalf("runs in 9 s at 2 s = %d, want 4", got)
		}
	})
}
