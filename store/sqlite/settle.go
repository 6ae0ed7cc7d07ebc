package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// Settle runs fn in one IMMEDIATE transaction.
func (s *backend) Settle(ctx context.Context, st storecore.Settlement) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error { return st.Settle(ctx, settleTx{s, tx, now}) })
}

// settleTx is one settling transaction, at one time.
type settleTx struct {
	s   *backend
	tx  *sql.Tx
	now int64
}

func (t settleTx) CompleteCurrent(ctx context.Context, cs []store.Completion) ([]storecore.Held, error) {
	if !slices.ContainsFunc(cs, func(c store.Completion) bool { return c.Late }) {
		rows, err := t.tx.StmtContext(ctx, t.s.st.prepared[qComplete]).QueryContext(ctx, t.now, leasesJSON(cs, func(c store.Completion) store.Lease { return c.Lease }))
		if err != nil {
			return nil, err
		}
		return sqlstate.Collect(rows, func(r *sql.Rows) (storecore.Held, error) { return scanHeld(r.Scan) })
	}
	// The late leases whose messages are completed already, read before
	// this completes others.
	var late []store.Lease
	for _, c := range cs {
		if c.Late {
			late = append(late, c.Lease)
		}
	}
	rows, err := t.tx.QueryContext(ctx, t.s.st.Text(qCompletedUnder), leasesJSON(late, func(l store.Lease) store.Lease { return l }))
	if err != nil {
		return nil, err
	}
	repeated, err := sqlstate.Collect(rows, func(r *sql.Rows) (storecore.Held, error) {
		h, err := scanHeld(r.Scan)
		h.Repeated = true
		return h, err
	})
	if err != nil {
		return nil, err
	}
	rows, err = t.tx.QueryContext(ctx, t.s.st.Text(qCompleteLate), t.now, completionsJSON(cs))
	if err != nil {
		return nil, err
	}
	done, err := sqlstate.Collect(rows, func(r *sql.Rows) (storecore.Held, error) { return scanHeld(r.Scan) })
	return append(done, repeated...), err
}

// completionsJSON encodes completions as a JSON array of [id, fencing
// token, late] triples.
func completionsJSON(cs []store.Completion) string {
	b := make([]byte, 0, 2+len(cs)*26)
	b = append(b, '[')
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, c.MessageID, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, c.FencingToken, 10)
		b = append(b, ',')
		b = strconv.AppendBool(b, c.Late)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// scanHeld reads a row's id, fencing token, queue and key, then the
// extra columns into their destinations.
func scanHeld(scan func(...any) error, extra ...any) (storecore.Held, error) {
	var h storecore.Held
	var key sql.NullString
	err := scan(append([]any{&h.MessageID, &h.FencingToken, &h.Queue, &key}, extra...)...)
	h.Key = key.String
	return h, err
}

func (t settleTx) Current(ctx context.Context, l store.Lease) (storecore.Held, bool, error) {
	return t.held(t.tx.StmtContext(ctx, t.s.st.prepared[qCurrent]).QueryRowContext(ctx, l.MessageID, l.FencingToken, t.now), l)
}

func (t settleTx) Given(ctx context.Context, l store.Lease) (storecore.Held, bool, error) {
	return t.held(t.tx.QueryRowContext(ctx, t.s.st.Text(qGiven), l.MessageID, l.FencingToken), l)
}

// held reads the message of lease l from row, which current or given
// found, if it found one.
func (t settleTx) held(row *sql.Row, l store.Lease) (storecore.Held, bool, error) {
	h := storecore.Held{Lease: l}
	var key, dlq sql.NullString
	err := row.Scan(&h.Deliveries, &h.MaxDeliveries, &h.Queue, &key, &dlq, &h.Arrival, &h.Independent)
	if errors.Is(err, sql.ErrNoRows) {
		return storecore.Held{}, false, nil
	}
	if err != nil {
		return storecore.Held{}, false, err
	}
	h.Key, h.DeadLetterQueue = key.String, dlq.String
	return h, true, nil
}

func (t settleTx) Expired(ctx context.Context) ([]storecore.Held, error) {
	rows, err := t.tx.QueryContext(ctx, t.s.st.Text(qExpired), t.now)
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, func(r *sql.Rows) (storecore.Held, error) {
		var deliveries, max int
		var lockedUntil, arrival int64
		var dlq sql.NullString
		var independent bool
		h, err := scanHeld(r.Scan, &deliveries, &max, &lockedUntil, &dlq, &arrival, &independent)
		h.Arrival, h.Independent = arrival, independent
		h.Deliveries, h.MaxDeliveries, h.DeadLetterQueue = deliveries, max, dlq.String
		h.StuckFor = time.Duration(t.now-lockedUntil) * time.Microsecond
		return h, err
	})
}

func (t settleTx) Running(ctx context.Context, lines []storecore.Line) ([]storecore.Held, error) {
	var out []storecore.Held
	for _, l := range lines {
		rows, err := t.tx.QueryContext(ctx, t.s.st.Text(qRunning), l.Queue, l.Key)
		if err != nil {
			return nil, err
		}
		hs, err := sqlstate.Collect(rows, func(r *sql.Rows) (storecore.Held, error) {
			var arrival int64
			var independent, pending bool
			h, err := scanHeld(r.Scan, &arrival, &independent, &pending)
			h.Arrival, h.Independent, h.Pending = arrival, independent, pending
			return h, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
	}
	return out, nil
}

func (t settleTx) Find(ctx context.Context, ids []int64) ([]storecore.Found, error) {
	out := make([]storecore.Found, 0, len(ids))
	for _, id := range ids {
		f := storecore.Found{ID: id}
		var key sql.NullString
		err := t.tx.QueryRowContext(ctx, t.s.st.Text(qMessageOf), id).Scan(&f.Queue, &f.State, &key)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		f.Key = key.String
		out = append(out, f)
	}
	return out, nil
}

func (t settleTx) Kill(ctx context.Context, ids []int64, reason store.DeadReason, errText string, visibleNow bool) error {
	if err := t.noteError(ctx, ids, errText); err != nil {
		return err
	}
	_, err := t.tx.ExecContext(ctx, t.s.st.Text(qKill), string(reason), errText, t.now, visibleNow, idsJSON(ids))
	return err
}

// noteError adds errText to the error histories of the messages, before
// the statement that makes it their last error changes their deliveries.
func (t settleTx) noteError(ctx context.Context, ids []int64, errText string) error {
	_, err := t.tx.ExecContext(ctx, t.s.st.Text(qNoteError), idsJSON(ids), errText, t.now)
	return err
}

func (t settleTx) Movable(ctx context.Context, m store.Move) ([]storecore.Transfer, error) {
	var rows *sql.Rows
	var err error
	toSource := m.To == ""
	if m.State == store.Dead {
		rows, err = t.tx.QueryContext(ctx, t.s.st.Text(qMovableDead), m.Queue, toSource, m.Limit)
	} else {
		rows, err = t.tx.QueryContext(ctx, t.s.st.Text(qMovablePending), m.Queue, t.now, m.Limit, toSource)
	}
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, func(r *sql.Rows) (storecore.Transfer, error) {
		var tr storecore.Transfer
		var key, source sql.NullString
		err := r.Scan(&tr.ID, &key, &source)
		tr.Key, tr.To = key.String, cmp.Or(m.To, source.String)
		return tr, err
	})
}

func (t settleTx) Recorded(ctx context.Context, queues []string) ([]string, error) {
	var out []string
	for _, q := range queues {
		var one int
		err := t.tx.QueryRowContext(ctx, t.s.st.Text(qRecorded), q).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// Transfer draws the messages' arrivals in one step, in their order,
// then moves each.
func (t settleTx) Transfer(ctx context.Context, ts []storecore.Transfer, a storecore.Arrival) error {
	if a.Dead {
		ids := make([]int64, len(ts))
		for i, tr := range ts {
			ids[i] = tr.ID
		}
		if err := t.noteError(ctx, ids, a.Error); err != nil {
			return err
		}
	}
	var last int64
	if err := t.tx.QueryRowContext(ctx, t.s.st.Text(qArrivals), len(ts)).Scan(&last); err != nil {
		return err
	}
	for i, tr := range ts {
		arrival := last - int64(len(ts)-1-i)
		if _, err := t.tx.ExecContext(ctx, t.s.st.Text(qTransfer), tr.ID, tr.To, t.now, a.Dead, nullable(string(a.Reason)),
			a.Error, a.MaxDeliveries, nullable(a.DeadLetterQueue), arrival); err != nil {
			return err
		}
	}
	return nil
}

func (t settleTx) Uncount(ctx context.Context, ids []int64) error {
	_, err := t.tx.ExecContext(ctx, t.s.st.Text(qTakeBackDelivery), idsJSON(ids))
	return err
}

func (t settleTx) Retry(ctx context.Context, ids []int64, delay time.Duration, errText string, setError, uncount bool) error {
	if setError {
		if err := t.noteError(ctx, ids, errText); err != nil {
			return err
		}
	}
	_, err := t.tx.ExecContext(ctx, t.s.st.Text(qRetry), t.now+delay.Microseconds(), errText, setError, idsJSON(ids), uncount)
	return err
}

func (t settleTx) Hold(ctx context.Context, ids []int64, uncount bool) error {
	_, err := t.tx.ExecContext(ctx, t.s.st.Text(qHold), uncount, idsJSON(ids))
	return err
}

func (t settleTx) Cancel(ctx context.Context, ids []int64) error {
	_, err := t.tx.ExecContext(ctx, t.s.st.Text(qCancel), t.now, idsJSON(ids))
	return err
}

func (t settleTx) Rerun(ctx context.Context, ms []storecore.Found) error {
	for _, m := range ms {
		if _, err := t.tx.ExecContext(ctx, t.s.st.Text(qRedrive), t.now, m.ID); err != nil {
			return err
		}
	}
	return nil
}

func (t settleTx) Hasten(ctx context.Context, ids []int64) error {
	_, err := t.tx.ExecContext(ctx, t.s.st.Text(qHasten), t.now, idsJSON(ids))
	return err
}

func (t settleTx) Snoozed(ctx context.Context, id int64) error {
	_, err := t.tx.ExecContext(ctx, t.s.st.Text(qSnoozed), id)
	return err
}

// Delete deletes the messages, then takes the completed ones off their
// queues' counts: no trigger counts a deletion (see Prune).
func (t settleTx) Delete(ctx context.Context, ms []storecore.Found) error {
	ids := make([]int64, len(ms))
	completed := map[string]int{}
	for i, m := range ms {
		ids[i] = m.ID
		if m.State == store.Completed {
			completed[m.Queue]++
		}
	}
	if _, err := t.tx.ExecContext(ctx, t.s.st.Text(qDeleteMessages), idsJSON(ids)); err != nil {
		return err
	}
	for q, n := range completed {
		if _, err := t.tx.ExecContext(ctx, t.s.st.Text(qUncount), n, q); err != nil {
			return err
		}
	}
	return nil
}

// idsJSON encodes message ids as a JSON array, so that a batch is one
// statement.
func idsJSON(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*8)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// Lock takes nothing: the IMMEDIATE transaction holds the database's write
// lock.
func (settleTx) Lock(context.Context, []storecore.Line, []store.NewMessage) error { return nil }

func (t settleTx) Promote(ctx context.Context, lines []storecore.Line) error {
	promote := t.tx.StmtContext(ctx, t.s.st.prepared[qPromote])
	for _, l := range lines {
		if _, err := promote.ExecContext(ctx, l.Queue, l.Key); err != nil {
			return err
		}
	}
	return nil
}

func (t settleTx) Insert(ctx context.Context, msgs []store.NewMessage) error {
	_, err := t.s.enqueueTx(ctx, t.tx, msgs, t.now)
	return err
}

// Notify tells no one: other processes on the file learn of new work at
// their next poll.
func (settleTx) Notify(context.Context, []string) error { return nil }
