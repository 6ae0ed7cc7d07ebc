package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// deadlockAttempts bounds how often a transaction that the server chose
// as a deadlock's victim runs. A victim's next run may meet the other
// transaction still taking its locks, and be its victim again; on a busy
// server three runs were seen to fail in a row.
const deadlockAttempts = 10

// deadlockDetected is PostgreSQL's SQLSTATE for a transaction rolled
// back to end a deadlock.
const deadlockDetected = "40P01"

// again runs fn, and again, up to deadlockAttempts in all, while the
// server rolls the transaction fn runs back to end a deadlock: such a
// transaction changed nothing.
func again(fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		var pe *pgconn.PgError
		if attempt == deadlockAttempts || !errors.As(err, &pe) || pe.Code != deadlockDetected {
			return err
		}
	}
}

// inTxAgain runs fn in one READ COMMITTED transaction, again while the
// server ends a deadlock with it (see again).
func (s *backend) inTxAgain(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return again(func() error { return s.inTx(ctx, fn) })
}

// Settle runs fn in one READ COMMITTED transaction. A settlement locks
// rows and keys in the order its rule meets them, so two settlements of
// one key (a completion of a run's later message, and a give-back of an
// earlier one that brings it back) can wait on each other; the server
// then rolls one back, and it runs again.
func (s *backend) Settle(ctx context.Context, st storecore.Settlement) error {
	return again(func() error { return s.settleOnce(ctx, st) })
}

// settleOnce runs a settlement in a transaction whose statements go in
// as few round trips as its rule allows: the begin, indexScans and every
// statement whose result the rule does not read wait to go with the next
// one whose rows it reads, the commit with the last. They run in order all
// the same, and the first error among them ends the settlement. Its
// statements are prepared once per connection; indexScans keeps their
// plans index-backed.
func (s *backend) settleOnce(ctx context.Context, st storecore.Settlement) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t := &settleTx{s: s, conn: conn, queued: &pgx.Batch{}}
	defer func() {
		// A connection left inside the transaction, by an error, rolls it
		// back; one that cannot goes out of the pool when released.
		if conn.Conn().PgConn().TxStatus() != 'I' {
			conn.Exec(ctx, "ROLLBACK")
		}
		conn.Release()
	}()
	t.later(qBegin)
	t.later(qIndexScans)
	if err := st.Settle(ctx, t); err != nil {
		return err
	}
	t.count()
	t.later(qCommit)
	tag, err := t.flushTag(ctx)
	if err == nil && tag.String() != "COMMIT" {
		err = fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return err
}

// settleTx is one settling transaction.
type settleTx struct {
	s *backend
	// conn is the connection the transaction runs on.
	conn *pgxpool.Conn
	// queued are the statements not sent yet, in order.
	queued *pgx.Batch
	// completed counts the messages CompleteCurrent completed, by queue,
	// less those that left the completed state, for count.
	completed map[string]int64
	// tallies are the counts of the queues' minutes, for count.
	tallies []storecore.Tally
}

// later queues a statement whose result the settlement does not read.
func (t *settleTx) later(q query, args ...any) {
	t.queued.Queue(t.s.sql.Text(q), args...)
}

// send sends the queued statements and returns their results, read up
// to the last, which the caller reads.
func (t *settleTx) send(ctx context.Context) (pgx.BatchResults, error) {
	b := t.queued
	t.queued = &pgx.Batch{}
	br := t.conn.SendBatch(ctx, b)
	for range len(b.QueuedQueries) - 1 {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	return br, nil
}

// flush runs the queued statements.
func (t *settleTx) flush(ctx context.Context) error {
	_, err := t.flushTag(ctx)
	return err
}

// flushTag runs the queued statements and returns the last one's tag.
func (t *settleTx) flushTag(ctx context.Context) (pgconn.CommandTag, error) {
	if t.queued.Len() == 0 {
		return pgconn.CommandTag{}, nil
	}
	br, err := t.send(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

// query runs the queued statements and q, whose rows it returns.
func (t *settleTx) query(ctx context.Context, q query, args ...any) (pgx.Rows, error) {
	t.later(q, args...)
	br, err := t.send(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// batchRows are the rows of a batch's last statement; closing them closes
// the batch.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err, r.br = r.br.Close(), nil
	}
}

func (r *batchRows) Err() error { return cmp.Or(r.Rows.Err(), r.err) }

// count adds the completions to their queues' counts, and the tallies
// to their queues' minutes, in this connection's shards, in one
// statement; no trigger counts them (see the migrations). It runs last,
// after every other lock the transaction takes: a completion waiting on a
// key's lock must not hold a count row that other completions of the
// queue need meanwhile.
func (t *settleTx) count() {
	if len(t.completed) == 0 && len(t.tallies) == 0 {
		return
	}
	qs, ns := make([]string, 0, len(t.completed)), make([]int64, 0, len(t.completed))
	for q, n := range t.completed {
		qs, ns = append(qs, q), append(ns, n)
	}
	n := len(t.tallies)
	tq, tc, tf, td := make([]string, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, c := range t.tallies {
		tq[i], tc[i], tf[i], td[i] = c.Queue, c.Completed, c.Failed, c.Dead
	}
	t.later(qCount, t.s.now(), tq, tc, tf, td, qs, ns)
}

// Tally keeps the counts for count, which writes them last.
func (t *settleTx) Tally(_ context.Context, ts []storecore.Tally) error {
	t.tallies = append(t.tallies, ts...)
	return nil
}

func (t *settleTx) CompleteCurrent(ctx context.Context, cs []store.Completion) ([]storecore.Held, error) {
	ids, fences := leaseArrays(len(cs), func(i int) store.Lease { return cs[i].Lease })
	if slices.ContainsFunc(cs, func(c store.Completion) bool { return c.Late }) {
		late := make([]bool, len(cs))
		for i, c := range cs {
			late[i] = c.Late
		}
		rows, err := t.query(ctx, qCompleteLate, t.s.now(), ids, fences, late)
		return t.tally(rows, err, len(ids))
	}
	rows, err := t.query(ctx, qComplete, t.s.now(), ids, fences)
	out, err := t.tally(rows, err, len(ids))
	if err != nil || len(out) == len(cs) {
		return out, err
	}
	// The leases complete left out: lost, or their rows changed while it
	// ran (see complete in queries.sql).
	done := make(map[store.Lease]bool, len(out))
	for _, h := range out {
		done[h.Lease] = true
	}
	ids, fences = ids[:0], fences[:0]
	for _, c := range cs {
		if !done[c.Lease] {
			ids, fences = append(ids, c.MessageID), append(fences, c.FencingToken)
		}
	}
	if len(ids) == 0 {
		return out, nil // a lease listed twice completes once
	}
	rows, err = t.query(ctx, qCompleteAgain, t.s.now(), ids, fences)
	again, err := t.tally(rows, err, len(ids))
	return append(out, again...), err
}

// tally reads the messages a completion statement completed, at most n,
// and counts them (see countCompleted) but for those it reports completed
// before: completeLate's rows have a fifth column that tells.
func (t *settleTx) tally(rows pgx.Rows, err error, n int) ([]storecore.Held, error) {
	if err != nil {
		return nil, err
	}
	out := make([]storecore.Held, 0, n)
	var h storecore.Held
	var key *string
	dest := []any{&h.MessageID, &h.FencingToken, &h.Queue, &key}
	if len(rows.FieldDescriptions()) > len(dest) {
		dest = append(dest, &h.Repeated)
	}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		h.Key = deref(key)
		out = append(out, h)
		if h.Repeated {
			return nil // completed and counted before
		}
		if t.completed == nil {
			t.completed = map[string]int64{}
		}
		t.completed[h.Queue]++
		return nil
	})
	return out, err
}

func (t *settleTx) Current(ctx context.Context, l store.Lease) (storecore.Held, bool, error) {
	rows, err := t.query(ctx, qCurrent, t.s.now(), l.MessageID, l.FencingToken)
	return held(rows, err, l)
}

func (t *settleTx) Given(ctx context.Context, l store.Lease) (storecore.Held, bool, error) {
	rows, err := t.query(ctx, qGiven, l.MessageID, l.FencingToken)
	return held(rows, err, l)
}

// held reads the message of lease l from rows, which current or given
// found, if it found one.
func held(rows pgx.Rows, err error, l store.Lease) (storecore.Held, bool, error) {
	if err != nil {
		return storecore.Held{}, false, err
	}
	h := storecore.Held{Lease: l}
	var deliveries, max int32
	var key, dlq *string
	_, err = pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (struct{}, error) {
		return struct{}{}, r.Scan(&deliveries, &max, &h.Queue, &key, &dlq, &h.Arrival, &h.Independent)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return storecore.Held{}, false, nil
	}
	if err != nil {
		return storecore.Held{}, false, err
	}
	h.Key, h.Deliveries, h.MaxDeliveries, h.DeadLetterQueue = deref(key), int(deliveries), int(max), deref(dlq)
	return h, true, nil
}

func (t *settleTx) Expired(ctx context.Context) ([]storecore.Held, error) {
	rows, err := t.query(ctx, qExpired, t.s.now())
	if err != nil {
		return nil, err
	}
	var out []storecore.Held
	var h storecore.Held
	var key, dlq *string
	var deliveries, max int32
	_, err = pgx.ForEachRow(rows, []any{&h.MessageID, &h.FencingToken, &h.Queue, &key, &deliveries, &max, &h.StuckFor, &dlq, &h.Arrival, &h.Independent}, func() error {
		h.Key, h.Deliveries, h.MaxDeliveries, h.DeadLetterQueue = deref(key), int(deliveries), int(max), deref(dlq)
		out = append(out, h)
		return nil
	})
	return out, err
}

func (t *settleTx) Running(ctx context.Context, lines []storecore.Line) ([]storecore.Held, error) {
	// The keys' locks first (see running in queries.sql).
	if err := t.Lock(ctx, lines, nil); err != nil {
		return nil, err
	}
	queues, keys := make([]string, len(lines)), make([]string, len(lines))
	for i, l := range lines {
		queues[i], keys[i] = l.Queue, l.Key
	}
	rows, err := t.query(ctx, qRunning, queues, keys)
	if err != nil {
		return nil, err
	}
	var out []storecore.Held
	var h storecore.Held
	var key *string
	_, err = pgx.ForEachRow(rows, []any{&h.MessageID, &h.FencingToken, &h.Queue, &key, &h.Arrival, &h.Independent, &h.Pending}, func() error {
		h.Key = deref(key)
		out = append(out, h)
		return nil
	})
	return out, err
}

func (t *settleTx) Find(ctx context.Context, ids []int64) ([]storecore.Found, error) {
	// The keys' locks first, waiting messages' too, as every change to a
	// key's line takes them: a promotion running meanwhile must not make a
	// message this changes its key's head again. A message's key never
	// changes, so reading them unlocked is safe.
	keyRows, err := t.query(ctx, qKeysOf, ids)
	if err != nil {
		return nil, err
	}
	var locks []string
	var q string
	var k *string
	if _, err := pgx.ForEachRow(keyRows, []any{&q, &k}, func() error {
		if k != nil {
			locks = append(locks, keyLock(q, *k))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	t.lock(locks)
	rows, err := t.query(ctx, qCancelRows, ids)
	if err != nil {
		return nil, err
	}
	var out []storecore.Found
	var f storecore.Found
	var state int16
	_, err = pgx.ForEachRow(rows, []any{&f.ID, &f.Queue, &state, &k}, func() error {
		f.State, f.Key = store.State(state), deref(k)
		out = append(out, f)
		return nil
	})
	return out, err
}

func (t *settleTx) Kill(ctx context.Context, ids []int64, reason store.DeadReason, errText string, visibleNow bool) error {
	t.later(qKill, t.s.now(), ids, string(reason), errText, visibleNow)
	return nil
}

// Movable reads the candidates unlocked, takes the locks of their keys'
// lines, where they are and where they go, then locks those that are
// still candidates: keys before rows, as Find takes them, so that a
// cancel of the same line never waits on this in the other order.
func (t *settleTx) Movable(ctx context.Context, m store.Move) ([]storecore.Transfer, error) {
	toSource := m.To == ""
	var rows pgx.Rows
	var err error
	if m.State == store.Dead {
		rows, err = t.query(ctx, qMovableDead, m.Queue, toSource, m.Limit)
	} else {
		rows, err = t.query(ctx, qMovablePending, t.s.now(), m.Queue, m.Limit, toSource)
	}
	if err != nil {
		return nil, err
	}
	var found []storecore.Transfer
	var tr storecore.Transfer
	var key, source *string
	if _, err := pgx.ForEachRow(rows, []any{&tr.ID, &key, &source}, func() error {
		tr.Key, tr.To = deref(key), cmp.Or(m.To, deref(source))
		found = append(found, tr)
		return nil
	}); err != nil || len(found) == 0 {
		return nil, err
	}
	var locks []string
	ids := make([]int64, len(found))
	for i, f := range found {
		ids[i] = f.ID
		if f.Key != "" {
			locks = append(locks, keyLock(m.Queue, f.Key), keyLock(f.To, f.Key))
		}
	}
	t.lock(locks)
	rows, err = t.query(ctx, qMovableLock, ids, m.Queue, int16(m.State))
	if err != nil {
		return nil, err
	}
	// A message's source changes only when it moves, and one still of
	// the queue in the state has not moved since it was read: the target
	// read unlocked still holds.
	locked := map[int64]bool{}
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		locked[id] = true
		return nil
	}); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(found, func(f storecore.Transfer) bool { return !locked[f.ID] }), nil
}

func (t *settleTx) Recorded(ctx context.Context, queues []string) ([]string, error) {
	rows, err := t.query(ctx, qRecorded, queues)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (t *settleTx) Transfer(ctx context.Context, ts []storecore.Transfer, a storecore.Arrival) error {
	for _, tr := range ts {
		t.later(qTransfer, t.s.now(), tr.ID, tr.To, a.Dead, nullable(string(a.Reason)), a.Error, int32(a.MaxDeliveries),
			nullable(a.DeadLetterQueue))
	}
	return nil
}

func (t *settleTx) Retry(ctx context.Context, ids []int64, delay time.Duration, errText string, setError, uncount bool) error {
	t.later(qRetry, t.s.now(), ids, micros(delay), errText, setError, uncount)
	return nil
}

func (t *settleTx) Hold(ctx context.Context, ids []int64, uncount bool) error {
	t.later(qHold, ids, uncount)
	return nil
}

// Cancel cancels the messages and tells every process of the database,
// once the transaction commits, with a notification whose payload is
// empty, which names no queue: their workers then renew their leases at
// once, and learn which were cancelled.
func (t *settleTx) Cancel(ctx context.Context, ids []int64) error {
	t.later(qCancel, t.s.now(), ids)
	t.later(qNotify, t.s.channel, []string{""})
	return nil
}

// Rerun brings the messages back one statement each, in order: each
// statement sees the ones before it, so that of two messages of a key
// only the first becomes its head.
func (t *settleTx) Rerun(ctx context.Context, ms []storecore.Found) error {
	for _, m := range ms {
		t.later(qRedrive, t.s.now(), m.ID)
	}
	t.uncount(ms)
	return nil
}

func (t *settleTx) Hasten(ctx context.Context, ids []int64) error {
	t.later(qHasten, t.s.now(), ids)
	return nil
}

func (t *settleTx) Snoozed(ctx context.Context, id int64) error {
	t.later(qSnoozed, id)
	return nil
}

func (t *settleTx) Delete(ctx context.Context, ms []storecore.Found) error {
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	t.later(qPurge, ids)
	t.uncount(ms)
	return nil
}

// uncount takes the completed ones of messages that leave their state
// off their queues' counts, which count writes.
func (t *settleTx) uncount(ms []storecore.Found) {
	for _, m := range ms {
		if m.State == store.Completed {
			if t.completed == nil {
				t.completed = map[string]int64{}
			}
			t.completed[m.Queue]--
		}
	}
}

// Lock takes the advisory locks of the lines' keys and of the messages'
// keys and dedup ids in one sorted call. Advisory locks are re-entrant, so
// Promote and Insert taking them again never wait.
func (t *settleTx) Lock(ctx context.Context, lines []storecore.Line, msgs []store.NewMessage) error {
	locks := enqueueLocks(nil, msgs)
	for _, l := range lines {
		locks = append(locks, keyLock(l.Queue, l.Key))
	}
	t.lock(locks)
	return nil
}

// lock queues the taking of the advisory locks of names, in lockKeys's
// order.
func (t *settleTx) lock(names []string) {
	if names = distinct(names); len(names) > 0 {
		t.later(qLockKeys, names)
	}
}

func (t *settleTx) Promote(ctx context.Context, lines []storecore.Line) error {
	for _, l := range lines {
		t.later(qPromote, l.Queue, l.Key)
	}
	return nil
}

func (t *settleTx) Insert(ctx context.Context, msgs []store.NewMessage) error {
	if err := t.flush(ctx); err != nil {
		return err
	}
	_, err := t.s.enqueueTx(ctx, t.s.pgxRunner(t.conn), msgs, nil)
	return err
}

func (t *settleTx) Notify(ctx context.Context, queues []string) error {
	if len(queues) > 0 {
		t.later(qNotify, t.s.channel, distinct(queues))
	}
	return nil
}

func (t *settleTx) Uncount(_ context.Context, ids []int64) error {
	t.later(qTakeBackDelivery, ids)
	return nil
}
