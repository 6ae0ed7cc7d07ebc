package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/sqlstate"
)

// runner is the part of a transaction that enqueueing needs. Enqueue runs on
// a pgx transaction; EnqueueSQLTx on the caller's *sql.Tx, whose driver may
// not encode arrays, so that path sends only scalar arguments.
type runner interface {
	exec(ctx context.Context, sql string, args ...any) error
	// queryRow scans one row into dest; no row is pgx.ErrNoRows.
	queryRow(ctx context.Context, sql string, args []any, dest ...any) error
	// lock takes the advisory locks of names, already sorted.
	lock(ctx context.Context, names []string) error
	// notify sends a notification with each queue's name on channel.
	notify(ctx context.Context, channel string, queues []string) error
	// pgx returns the pgx transaction, or the pooled connection inside
	// one, if the runner has one.
	pgx() pgxTx
}

// pgxTx is a pgx transaction, or a pooled connection inside one.
type pgxTx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	batcher
}

type pgxRunner struct {
	tx pgxTx
	st *sqlstate.Statements[query]
}

func (r pgxRunner) exec(ctx context.Context, sql string, args ...any) error {
	_, err := r.tx.Exec(ctx, sql, append([]any{replan}, args...)...)
	return err
}

func (r pgxRunner) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	return r.tx.QueryRow(ctx, sql, append([]any{replan}, args...)...).Scan(dest...)
}

// lock and notify do not read the messages table: their statements keep
// the cached plan.
func (r pgxRunner) lock(ctx context.Context, names []string) error {
	_, err := r.tx.Exec(ctx, r.st.Text(qLockKeys), names)
	return err
}

func (r pgxRunner) notify(ctx context.Context, channel string, queues []string) error {
	_, err := r.tx.Exec(ctx, r.st.Text(qNotify), channel, queues)
	return err
}

func (r pgxRunner) pgx() pgxTx { return r.tx }

type sqlRunner struct{ tx *sql.Tx }

func (r sqlRunner) exec(ctx context.Context, sql string, args ...any) error {
	_, err := r.tx.ExecContext(ctx, sql, args...)
	return err
}

func (r sqlRunner) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	err := r.tx.QueryRowContext(ctx, query, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return pgx.ErrNoRows
	}
	return err
}

func (r sqlRunner) lock(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := r.exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, n); err != nil {
			return err
		}
	}
	return nil
}

func (r sqlRunner) notify(ctx context.Context, channel string, queues []string) error {
	for _, q := range queues {
		if err := r.exec(ctx, `SELECT pg_notify($1, $2)`, channel, q); err != nil {
			return err
		}
	}
	return nil
}

func (r sqlRunner) pgx() pgxTx { return nil }
