package dashboard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/store"
)

// span is a stretch of a queue's throughput that a chart shows: Buckets
// buckets of Bucket each, the last holding the current minute.
type span struct {
	Buckets int
	Bucket  time.Duration
	// Name says the stretch in words: "last hour".
	Name string
}

// The charts' stretches: the last hour is the queues page's sparkline,
// and with the last day the queue page's two charts.
var (
	lastHour = span{Buckets: 60, Bucket: time.Minute, Name: "last hour"}
	lastDay  = span{Buckets: 96, Bucket: 15 * time.Minute, Name: "last 24 hours"}
)

// chart is a line chart of a queue's completions, failures and dead
// letters per minute, as SVG path data in a Width x Height box, the
// busiest bucket at the top; the counts come from the store, so every
// server of the database draws the same.
type chart struct {
	Span string
	// Width and Height are the box's.
	Width, Height int
	// Completed, Failed and Dead are the three lines' path data; empty
	// when there is no data.
	Completed, Failed, Dead string
	// Empty says that no minute of the stretch counted anything.
	Empty bool
	// Last is the completions of the last whole minute, as "12/min", or
	// "no data yet".
	Last string
	// Summary says the chart in words, for its text alternative.
	Summary string
	// Totals are the stretch's sums.
	Totals totals
}

// totals are a stretch's sums.
type totals struct{ Completed, Failed, Dead int64 }

// throughput reads a queue's minutes once, for the longest of the
// stretches, and draws a chart of each stretch ending now, in a box of
// w x h.
func (d *Dashboard) throughput(ctx context.Context, queue string, w, h int, spans ...span) ([]chart, error) {
	now := d.clk.Now()
	starts := make([]time.Time, len(spans))
	since := now
	for i, s := range spans {
		starts[i] = now.Truncate(s.Bucket).Add(-time.Duration(s.Buckets-1) * s.Bucket)
		if starts[i].Before(since) {
			since = starts[i]
		}
	}
	ms, err := d.st.Throughput(ctx, queue, since)
	if err != nil {
		return nil, err
	}
	out := make([]chart, len(spans))
	for i, s := range spans {
		out[i] = newChart(ms, s, starts[i], now, w, h)
	}
	return out, nil
}

// newChart buckets the minutes from start on and draws them.
func newChart(ms []store.Minute, s span, start, now time.Time, w, h int) chart {
	c := chart{Span: s.Name, Width: w, Height: h, Empty: true}
	completed, failed, dead := make([]int64, s.Buckets), make([]int64, s.Buckets), make([]int64, s.Buckets)
	var lastMinute int64
	previous := now.Truncate(time.Minute).Add(-time.Minute)
	for _, m := range ms {
		i := int(m.At.Sub(start) / s.Bucket)
		if m.At.Before(start) || i >= s.Buckets {
			continue
		}
		c.Empty = false
		completed[i] += m.Completed
		failed[i] += m.Failed
		dead[i] += m.Dead
		c.Totals.Completed += m.Completed
		c.Totals.Failed += m.Failed
		c.Totals.Dead += m.Dead
		if m.At.Equal(previous) {
			lastMinute = m.Completed
		}
	}
	if c.Empty {
		c.Last = "no data yet"
		c.Summary = fmt.Sprintf("no completions, failures or dead letters counted in the %s: no data yet", s.Name)
		return c
	}
	top := int64(0)
	for i := range s.Buckets {
		top = max(top, completed[i], failed[i], dead[i])
	}
	c.Completed, c.Failed, c.Dead = path(completed, top, w, h), path(failed, top, w, h), path(dead, top, w, h)
	c.Last = fmt.Sprintf("%d/min", lastMinute)
	perMinute := float64(top) / s.Bucket.Minutes()
	c.Summary = fmt.Sprintf("in the %s: %d completed, %d failed, %d dead; at most %s per minute; %d completed in the last whole minute",
		s.Name, c.Totals.Completed, c.Totals.Failed, c.Totals.Dead, trimFloat(perMinute), lastMinute)
	return c
}

// path draws counts as a line across a w x h box, top at the box's top.
func path(counts []int64, top int64, w, h int) string {
	var b strings.Builder
	step := float64(w) / float64(max(len(counts)-1, 1))
	for i, n := range counts {
		y := float64(h) - 1
		if top > 0 {
			y -= (float64(h) - 2) * float64(n) / float64(top)
		}
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f ", cmd, step*float64(i), y)
	}
	return strings.TrimSpace(b.String())
}

// trimFloat writes f with at most one decimal, none when it is whole.
func trimFloat(f float64) string {
	s := fmt.Sprintf("%.1f", f)
	return strings.TrimSuffix(s, ".0")
}
