package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/store"
)

func (s *backend) Throughput(ctx context.Context, queue string, since time.Time) ([]store.Minute, error) {
	rows, err := s.pool.Query(ctx, s.sql.Text(qThroughput), replan, queue, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Minute, error) {
		var m store.Minute
		err := r.Scan(&m.At, &m.Completed, &m.Failed, &m.Dead)
		m.At = m.At.UTC()
		return m, err
	})
}

func (s *backend) PruneThroughput(ctx context.Context, olderThan time.Duration) (int, error) {
	tag, err := s.pool.Exec(ctx, s.sql.Text(qPruneThroughput), replan, s.now(), micros(olderThan))
	return int(tag.RowsAffected()), err
}

func (s *backend) Scheduled(ctx context.Context, queue string, after store.ScheduledAfter, limit int) ([]store.Info, error) {
	// Without a position, the page starts at the first: before any time.
	from := time.Unix(0, 0)
	if after.ID > 0 {
		from = after.VisibleAt
	}
	rows, err := s.pool.Query(ctx, s.sql.Text(qScheduled), replan, queue, s.now(), from, after.ID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Info, error) { return scanInfo(r) })
}
