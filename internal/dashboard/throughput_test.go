package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// A chart buckets the minutes of its stretch, scales its three lines to
// the busiest bucket, leaves out minutes outside the stretch, and gives
// the last whole minute's completions; with no minutes it says there is
// no data yet.
func TestNewChart(t *testing.T) {
	now := time.Date(2024, 1, 1, 12, 30, 20, 0, time.UTC)
	start := now.Truncate(time.Minute).Add(-59 * time.Minute)
	empty := newChart(nil, lastHour, start, now, 120, 24)
	if !empty.Empty || empty.Last != "no data yet" || empty.Completed != "" || !strings.Contains(empty.Summary, "no data yet") {
		t.Fatalf("the chart of no minutes = %+v", empty)
	}
	ms := []store.Minute{
		{At: start.Add(-time.Minute), Completed: 1000}, // before the stretch
		{At: start, Completed: 4, Failed: 2},
		{At: now.Truncate(time.Minute).Add(-time.Minute), Completed: 8, Dead: 1},
		{At: now.Truncate(time.Minute), Completed: 2},
	}
	c := newChart(ms, lastHour, start, now, 120, 24)
	if c.Empty || c.Last != "8/min" || c.Totals != (totals{Completed: 14, Failed: 2, Dead: 1}) {
		t.Fatalf("chart = %+v", c)
	}
	// 60 points, from x 0 to 120; the busiest (8) at the top (y 1), a
	// bucket of 4 half way, none at the bottom (y 23).
	points := strings.Split(c.Completed, " L")
	if len(points) != 60 || points[0] != "M0.0 12.0" || points[58] != "118.0 1.0" || points[59] != "120.0 17.5" || points[30] != "61.0 23.0" {
		t.Fatalf("completions path = %q", c.Completed)
	}
	if !strings.HasPrefix(c.Failed, "M0.0 17.5 L") || !strings.Contains(c.Summary, "at most 8 per minute") {
		t.Fatalf("chart = %+v", c)
	}
	// Buckets of a quarter hour sum their minutes, and the summary gives
	// the busiest bucket per minute.
	dayStart := now.Truncate(15 * time.Minute).Add(-95 * 15 * time.Minute)
	day := newChart(ms, lastDay, dayStart, now, 600, 80)
	if day.Totals.Completed != 1014 || !strings.Contains(day.Summary, "at most 66.9 per minute") {
		t.Fatalf("day chart = %+v", day)
	}
}

func TestSpell(t *testing.T) {
	for d, want := range map[time.Duration]string{
		250 * time.Millisecond:                               "under a second",
		10 * time.Second:                                     "10s",
		4*time.Minute + 10*time.Second:                       "4m 10s",
		2*time.Hour + 5*time.Second:                          "2h 0m 5s",
		27*time.Hour + 1*time.Minute + 1400*time.Millisecond: "1d 3h 1m 1s",
	} {
		if got := spell(d); got != want {
			t.Errorf("spell(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestTraceID(t *testing.T) {
	for in, want := range map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01": "",
		"<script>": "",
		"":         "",
	} {
		if got := traceID(in); got != want {
			t.Errorf("traceID(%q) = %q, want %q", in, got, want)
		}
	}
}
