// Package metrictest is for the module's own tests: it reads what a
// manual reader collected, by instrument name.
package metrictest

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Collect reads every metric of r by name.
func Collect(t testing.TB, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// Sum is the total of the int64 sum named name, over all its series.
func Sum(t testing.TB, data map[string]metricdata.Aggregation, name string) int64 {
	t.Helper()
	s, ok := data[name].(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("metric %s: %T, want an int64 sum", name, data[name])
	}
	var total int64
	for _, dp := range s.DataPoints {
		total += dp.Value
	}
	return total
}
