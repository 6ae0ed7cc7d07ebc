package dashboard

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// series is one queue's recent completion counts, the oldest first; it
// keeps the last samples+1 of them.
type series struct {
	at        []time.Duration // monotonic time of each sample
	completed []int64
}

func (s *series) add(at time.Duration, completed int64) {
	s.at = append(s.at, at)
	s.completed = append(s.completed, completed)
	if len(s.at) > samples+1 {
		s.at = s.at[1:]
		s.completed = s.completed[1:]
	}
}

// rates are the completions per second between successive samples. The
// cleaner's deletions lower the completed count; an interval in which the
// count fell shows zero.
func (s *series) rates() []float64 {
	var out []float64
	for i := 1; i < len(s.at); i++ {
		d := max(s.completed[i]-s.completed[i-1], 0)
		out = append(out, float64(d)/(s.at[i]-s.at[i-1]).Seconds())
	}
	return out
}

// sample records every queue's completed count.
func (d *Dashboard) sample(ctx context.Context) {
	names, err := d.st.Queues(ctx)
	if err != nil {
		d.log.Warn("dashboard: could not list the queues for the charts", "error", err)
		return
	}
	now := d.clk.Monotonic()
	seen := map[string]bool{}
	for _, q := range names {
		st, err := d.st.Stats(ctx, q)
		if err != nil {
			continue
		}
		seen[q] = true
		d.mu.Lock()
		s := d.history[q]
		if s == nil {
			s = &series{}
			d.history[q] = s
		}
		s.add(now, st.Completed)
		d.mu.Unlock()
	}
	d.mu.Lock()
	for q := range d.history {
		if !seen[q] {
			delete(d.history, q)
		}
	}
	d.mu.Unlock()
}

// rates returns a queue's recent rates.
func (d *Dashboard) rates(queue string) []float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.history[queue]; s != nil {
		return s.rates()
	}
	return nil
}

// chart is a small line chart of rates as SVG path data in a 120x24 box,
// the highest rate at the top.
type chart struct {
	Path string
	Last string
	Max  string
}

func newChart(rates []float64) chart {
	if len(rates) == 0 {
		return chart{Last: "no samples yet"}
	}
	top := 0.0
	for _, r := range rates {
		top = max(top, r)
	}
	var b strings.Builder
	step := 120.0 / float64(max(samples-1, 1))
	start := 120 - step*float64(len(rates)-1)
	for i, r := range rates {
		y := 23.0
		if top > 0 {
			y = 23 - 22*r/top
		}
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f ", cmd, start+step*float64(i), y)
	}
	return chart{Path: strings.TrimSpace(b.String()), Last: fmt.Sprintf("%.1f/s", rates[len(rates)-1]), Max: fmt.Sprintf("%.1f/s", top)}
}
