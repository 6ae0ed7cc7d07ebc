package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// deadlockAttempts bounds how often a transaction that the server chose
// as a deadlock's victim runs.
const deadlockAttempts = 3

// deadlockDetected is PostgreSQL's SQLSTATE for a transaction rolled
// back to end a deadlock.
const deadlockDetected = "40P01"

// inTxAgain runs fn in one READ COMMITTED transaction, and again, up to
// deadlockAttempts in all, while the server rolls it back to end a
// deadlock: such a transaction changed nothing.
func (s *backend) inTxAgain(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.inTx(ctx, fn)
		var pe *pgconn.PgError
		if attempt == deadlockAttempts || !errors.As(err, &pe) || pe.Code != deadlockDetected {
			return err
		}
	}
}

// Settle runs fn in one READ COMMITTED transaction. A settlement locks
// rows and keys in the order its rule meets them, so two settlements of
// one key (a completion of a run's later message, and a give-back of an
// earlier one that brings it back) can wait on each other; the server
// then rolls one back, and it runs again.
func (s *backend) Settle(ctx context.Context, st storecore.Settlement) error {
	return s.inTxAgain(ctx, func(tx pgx.Tx) error {
		t := &settleTx{s: s, tx: tx}
		if err := st.Settle(ctx, t); err != nil {
			return err
		}
		return t.countCompleted(ctx)
	})
}

// settleTx is one settling transaction.
type settleTx struct {
	s  *backend
	tx pgx.Tx
	// completed counts the messages CompleteCurrent completed, by queue,
	// for countCompleted.
	completed map[string]int64
}

// countCompleted adds the completions to their queues' counts, in this
// connection's shard; no trigger counts them (see the migrations). It runs
// last, after every other lock the transaction takes: a completion waiting
// on a key's lock must not hold a count row that other completions of the
// queue need meanwhile.
func (t *settleTx) countCompleted(ctx context.Context) error {
	if len(t.completed) == 0 {
		return nil
	}
	qs, ns := make([]string, 0, len(t.completed)), make([]int64, 0, len(t.completed))
	for q, n := range t.completed {
		qs, ns = append(qs, q), append(ns, n)
	}
	_, err := t.tx.Exec(ctx, t.s.sql.Text(qCountCompleted), replan, qs, ns)
	return err
}

func (t *settleTx) CompleteCurrent(ctx context.Context, cs []store.Completion) ([]storecore.Held, error) {
	ids, fences := leaseArrays(len(cs), func(i int) store.Lease { return cs[i].Lease })
	var rows pgx.Rows
	var err error
	var h storecore.Held
	var key *string
	dest := []any{&h.MessageID, &h.FencingToken, &h.Queue, &key}
	if slices.ContainsFunc(cs, func(c store.Completion) bool { return c.Late }) {
		late := make([]bool, len(cs))
		for i, c := range cs {
			late[i] = c.Late
		}
		rows, err = t.tx.Query(ctx, t.s.sql.Text(qCompleteLate), replan, t.s.now(), ids, fences, late)
		dest = append(dest, &h.Repeated)
	} else {
		rows, err = t.tx.Query(ctx, t.s.sql.Text(qComplete), replan, t.s.now(), ids, fences)
	}
	if err != nil {
		return nil, err
	}
	var out []storecore.Held
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
	return held(t.tx.QueryRow(ctx, t.s.sql.Text(qCurrent), replan, t.s.now(), l.MessageID, l.FencingToken), l)
}

func (t *settleTx) Given(ctx context.Context, l store.Lease) (storecore.Held, bool, error) {
	return held(t.tx.QueryRow(ctx, t.s.sql.Text(qGiven), replan, l.MessageID, l.FencingToken), l)
}

// held reads the message of lease l from row, which current or given
// found, if it found one.
func held(row pgx.Row, l store.Lease) (storecore.Held, bool, error) {
	h := storecore.Held{Lease: l}
	var deliveries, max int32
	var key, dlq *string
	err := row.Scan(&deliveries, &max, &h.Queue, &key, &dlq, &h.Arrival, &h.Independent)
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
	// Read messages_processing in order (see reapScan in queries.sql).
	if _, err := t.tx.Exec(ctx, t.s.sql.Text(qReapScan)); err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(ctx, t.s.sql.Text(qExpired), replan, t.s.now())
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
	rows, err := t.tx.Query(ctx, t.s.sql.Text(qRunning), replan, queues, keys)
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
	keyRows, err := t.tx.Query(ctx, t.s.sql.Text(qKeysOf), replan, ids)
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
	if err := t.s.lockKeys(ctx, t.runner(), locks); err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(ctx, t.s.sql.Text(qCancelRows), replan, ids)
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
	_, err := t.tx.Exec(ctx, t.s.sql.Text(qKill), replan, t.s.now(), ids, string(reason), errText, visibleNow)
	return err
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
		rows, err = t.tx.Query(ctx, t.s.sql.Text(qMovableDead), replan, m.Queue, toSource, m.Limit)
	} else {
		rows, err = t.tx.Query(ctx, t.s.sql.Text(qMovablePending), replan, t.s.now(), m.Queue, m.Limit, toSource)
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
	if err := t.s.lockKeys(ctx, t.runner(), locks); err != nil {
		return nil, err
	}
	rows, err = t.tx.Query(ctx, t.s.sql.Text(qMovableLock), replan, ids, m.Queue, int16(m.State))
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
	rows, err := t.tx.Query(ctx, t.s.sql.Text(qRecorded), replan, queues)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (t *settleTx) Transfer(ctx context.Context, ts []storecore.Transfer, a storecore.Arrival) error {
	for _, tr := range ts {
		if _, err := t.tx.Exec(ctx, t.s.sql.Text(qTransfer), replan, t.s.now(), tr.ID, tr.To, a.Dead, nullable(string(a.Reason)),
			a.Error, int32(a.MaxDeliveries), nullable(a.DeadLetterQueue)); err != nil {
			return err
		}
	}
	return nil
}

func (t *settleTx) Retry(ctx context.Context, ids []int64, delay time.Duration, errText string, setError, uncount bool) error {
	_, err := t.tx.Exec(ctx, t.s.sql.Text(qRetry), replan, t.s.now(), ids, micros(delay), errText, setError, uncount)
	return err
}

func (t *settleTx) Hold(ctx context.Context, ids []int64, uncount bool) error {
	_, err := t.tx.Exec(ctx, t.s.sql.Text(qHold), replan, ids, uncount)
	return err
}

// Cancel cancels the messages and tells every process of the database,
// once the transaction commits, with a notification whose payload is
// empty, which names no queue: their workers then renew their leases at
// once, and learn which were cancelled.
func (t *settleTx) Cancel(ctx context.Context, ids []int64) error {
	if _, err := t.tx.Exec(ctx, t.s.sql.Text(qCancel), replan, t.s.now(), ids); err != nil {
		return err
	}
	return t.runner().notify(ctx, t.s.channel, []string{""})
}

// Lock takes the advisory locks of the lines' keys and of the messages'
// keys and dedup ids in one sorted call. Advisory locks are re-entrant, so
// Promote and Insert taking them again never wait.
func (t *settleTx) Lock(ctx context.Context, lines []storecore.Line, msgs []store.NewMessage) error {
	locks := enqueueLocks(nil, msgs)
	for _, l := range lines {
		locks = append(locks, keyLock(l.Queue, l.Key))
	}
	return t.s.lockKeys(ctx, t.runner(), locks)
}

func (t *settleTx) Promote(ctx context.Context, lines []storecore.Line) error {
	for _, l := range lines {
		if _, err := t.tx.Exec(ctx, t.s.sql.Text(qPromote), replan, l.Queue, l.Key); err != nil {
			return err
		}
	}
	return nil
}

func (t *settleTx) Insert(ctx context.Context, msgs []store.NewMessage) error {
	_, err := t.s.enqueueTx(ctx, t.runner(), msgs, nil)
	return err
}

func (t *settleTx) Notify(ctx context.Context, queues []string) error {
	return t.s.notify(ctx, t.runner(), queues, nil)
}

func (t *settleTx) runner() runner { return t.s.pgxRunner(t.tx) }
