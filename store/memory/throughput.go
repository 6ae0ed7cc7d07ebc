package memory

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// minuteOf is the start of the minute of a time in Unix nanoseconds, in
// Unix minutes.
func minuteOf(nanos int64) int64 { return nanos / int64(time.Minute) }

func (t *settleTx) Tally(_ context.Context, ts []storecore.Tally) error {
	s := t.b()
	if s.throughput == nil {
		s.throughput = map[string]map[int64]*store.Minute{}
	}
	at := minuteOf(t.settling.now)
	for _, c := range ts {
		minutes := s.throughput[c.Queue]
		if minutes == nil {
			minutes = map[int64]*store.Minute{}
			s.throughput[c.Queue] = minutes
		}
		m := minutes[at]
		if m == nil {
			m = &store.Minute{At: time.Unix(at*60, 0).UTC()}
			minutes[at] = m
		}
		m.Completed += c.Completed
		m.Failed += c.Failed
		m.Dead += c.Dead
	}
	return nil
}

func (s *backend) Throughput(_ context.Context, queue string, since time.Time) ([]store.Minute, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Minute
	for _, m := range s.throughput[queue] {
		if !m.At.Before(since.Truncate(time.Minute)) {
			out = append(out, *m)
		}
	}
	slices.SortFunc(out, func(a, b store.Minute) int { return a.At.Compare(b.At) })
	return out, nil
}

func (s *backend) PruneThroughput(_ context.Context, olderThan time.Duration) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.clk.Now().Add(-olderThan)
	n := 0
	for q, minutes := range s.throughput {
		for at, m := range minutes {
			if m.At.Before(before) {
				delete(minutes, at)
				n++
			}
		}
		if len(minutes) == 0 {
			delete(s.throughput, q)
		}
	}
	return n, nil
}

func (s *backend) Scheduled(_ context.Context, queue string, after store.ScheduledAfter, limit int) ([]store.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[queue]
	if !ok {
		return nil, nil
	}
	now := s.clk.Now().UnixNano()
	var from int64
	if after.ID > 0 {
		from = after.VisibleAt.UnixNano()
	}
	var found []*message
	for _, h := range []*pendingHeap{&q.delayed, &q.ready} {
		for _, m := range h.ms {
			if m.visibleAt > now && (m.visibleAt > from || m.visibleAt == from && m.id > after.ID) {
				found = append(found, m)
			}
		}
	}
	slices.SortFunc(found, func(a, b *message) int { return cmp.Or(cmp.Compare(a.visibleAt, b.visibleAt), cmp.Compare(a.id, b.id)) })
	out := make([]store.Info, 0, min(len(found), limit))
	for _, m := range found[:min(len(found), limit)] {
		out = append(out, m.info())
	}
	return out, nil
}
