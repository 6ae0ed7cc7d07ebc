package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// microsPerMinute converts the store's times, in Unix microseconds, to
// Unix minutes.
const microsPerMinute = int64(time.Minute / time.Microsecond)

func (t settleTx) Tally(ctx context.Context, ts []storecore.Tally) error {
	stmt := t.tx.StmtContext(ctx, t.s.st.prepared[qTally])
	minute := t.now / microsPerMinute
	for _, c := range ts {
		if _, err := stmt.ExecContext(ctx, c.Queue, minute, c.Completed, c.Failed, c.Dead); err != nil {
			return err
		}
	}
	return nil
}

func (s *backend) Throughput(ctx context.Context, queue string, since time.Time) ([]store.Minute, error) {
	rows, err := s.db.QueryContext(ctx, s.st.Text(qThroughput), queue, since.Unix()/60)
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, func(r *sql.Rows) (store.Minute, error) {
		var m store.Minute
		var minute int64
		err := r.Scan(&minute, &m.Completed, &m.Failed, &m.Dead)
		m.At = time.Unix(minute*60, 0).UTC()
		return m, err
	})
}

func (s *backend) PruneThroughput(ctx context.Context, olderThan time.Duration) (int, error) {
	return s.affected(ctx, s.st.Text(qPruneThroughput), func(now int64) []any {
		// The minutes that began before the age's start, which is within
		// the minute it rounds up to.
		from := now - olderThan.Microseconds()
		return []any{(from + microsPerMinute - 1) / microsPerMinute}
	})
}

// Scheduled reads a page of each of the queue's priorities and merges
// them: the ready index orders pending messages by priority first, so a
// page by visible time is the first of each priority's pages.
func (s *backend) Scheduled(ctx context.Context, queue string, after store.ScheduledAfter, limit int) ([]store.Info, error) {
	now := micros(s.clk.Now())
	var fromAt int64
	if after.ID > 0 {
		fromAt = micros(after.VisibleAt)
	}
	rows, err := s.db.QueryContext(ctx, s.st.Text(qScheduledPriorities), queue)
	if err != nil {
		return nil, err
	}
	priorities, err := sqlstate.Collect(rows, func(r *sql.Rows) (p int, err error) { return p, r.Scan(&p) })
	if err != nil {
		return nil, err
	}
	var out []store.Info
	for _, p := range priorities {
		rows, err := s.db.QueryContext(ctx, s.st.Text(qScheduled), queue, p, now, fromAt, after.ID, limit)
		if err != nil {
			return nil, err
		}
		page, err := sqlstate.Collect(rows, scanRow)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
	}
	slices.SortFunc(out, func(a, b store.Info) int { return cmp.Or(a.VisibleAt.Compare(b.VisibleAt), cmp.Compare(a.ID, b.ID)) })
	return out[:min(len(out), limit)], nil
}
