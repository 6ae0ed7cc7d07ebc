package dashboard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// series is one queue's recent completion counts, the oldest first,
// over the last samples+1 samples. A queue whose count has not changed in
// that window keeps its last count alone, so that idle queues, however
// many, cost a few words each.
type series struct {
	// last is the latest count and lastAt the monotonic time it was
	// sampled; taken counts the samples, up to samples+1.
	last   int64
	lastAt time.Duration
	taken  int
	// at and completed are the window's samples while it holds a change
	// of the count; nil while the queue is idle.
	at        []time.Duration
	completed []int64
}

func (s *series) add(at time.Duration, completed int64) {
	if s.at == nil && s.taken > 0 && completed != s.last {
		// The first change in the window: its samples start with the
		// one before it.
		s.at, s.completed = []time.Duration{s.lastAt}, []int64{s.last}
	}
	s.taken = min(s.taken+1, samples+1)
	s.last, s.lastAt = completed, at
	if s.at == nil {
		return
	}
	s.at = append(s.at, at)
	s.completed = append(s.completed, completed)
	if len(s.at) > samples+1 {
		s.at = s.at[1:]
		s.completed = s.completed[1:]
	}
	if len(s.at) == samples+1 && !slices.ContainsFunc(s.completed, func(n int64) bool { return n != completed }) {
		s.at, s.completed = nil, nil
	}
}

// rates are the completions per second between successive samples, the
// window's idle intervals before its first change at zero. The cleaner's
// deletions lower the completed count; an interval in which the count
// fell shows zero.
func (s *series) rates() []float64 {
	out := make([]float64, max(s.taken-max(len(s.at), 1), 0), s.taken)
	for i := 1; i < len(s.at); i++ {
		d := max(s.completed[i]-s.completed[i-1], 0)
		out = append(out, float64(d)/(s.at[i]-s.at[i-1]).Seconds())
	}
	return out
}

// sample records every queue's completed count, read for all queues in
// one store call.
func (d *Dashboard) sample(ctx context.Context) {
	all, err := d.st.AllStats(ctx)
	if err != nil {
		d.log.Warn("dashboard: could not count the queues for the charts", "error", err)
		return
	}
	now := d.clk.Monotonic()
	seen := make(map[string]bool, len(all))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, st := range all {
		seen[st.Queue] = true
		s := d.history[st.Queue]
		if s == nil {
			s = &series{}
			d.history[st.Queue] = s
		}
		s.add(now, st.Completed)
	}
	for q := range d.history {
		if !seen[q] {
			delete(d.history, q)
		}
	}
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
