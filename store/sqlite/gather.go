package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Concurrent writes share a commit (a group commit): with one connection
// they would run one after the other anyway, each waiting for the sync of
// the one before. A write that finds another under way waits; when that
// one has committed, the first of those waiting runs itself and every
// write waiting then in one transaction, each under a savepoint of its
// own, commits once, and answers each: every caller learns its outcome
// only after the commit that holds its change, or that failed it.
//
// The rules:
//   - The writes of a transaction run in the order they came, each at its
//     own time, seeing the ones before it: as if run one after the other.
//   - A write that fails is rolled back to its savepoint, alone; one that
//     leaves no transaction to go on with (SQLite rolled it back), or a
//     failed commit, fails every write of the transaction.
//   - A caller whose context ends while it waits is dropped, and its write
//     never runs. Once its transaction has begun, its write runs (unless
//     its context ended before its turn) with the context write hands fn,
//     which does not end, and the caller waits for the commit. fn runs its
//     statements with that context, never its caller's: the driver
//     interrupts a statement whose context ends, and SQLite then rolls
//     back the whole transaction, the others' writes with it.
//   - A write that finds none under way runs alone, as without gathering.
//
// Claims do not gather: they commit at another synchronous level (see
// durability.go), holding the store's connection for their own
// transaction, between the gathered ones.

// gathering holds the writes waiting for the one under way.
type gathering struct {
	mu      sync.Mutex
	busy    bool // a transaction of writes is under way
	waiting []*gathered
}

// gathered is one write and, once answered, its outcome.
type gathered struct {
	ctx context.Context
	fn  func(ctx context.Context, tx *sql.Tx, now int64) error
	err error
	// turn gets true when the write is answered, false when its caller is
	// to run the next transaction.
	turn chan bool
}

// write runs fn in an IMMEDIATE transaction at the current time, and
// returns when that transaction has committed or failed; it gathers with
// concurrent writes (see above). fn runs its statements with the context
// it is given.
func (s *backend) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx, now int64) error) error {
	w := &gathered{ctx: ctx, fn: fn, turn: make(chan bool, 1)}
	if !s.join(w) {
		return w.err
	}
	batch := append([]*gathered{w}, s.take()...)
	if len(batch) == 1 {
		w.err = s.txOn(ctx, s.db, fn)
	} else {
		s.runGathered(batch)
	}
	for _, o := range batch[1:] {
		o.turn <- true
	}
	s.passOn()
	return w.err
}

// join reports whether w's caller is to run a transaction: at once when
// none is under way, or when the one running before hands it over. It
// reports false when w was answered by another's transaction, or dropped
// (w.err is its context's error).
func (s *backend) join(w *gathered) bool {
	g := &s.gather
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return true
	}
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	select {
	case answered := <-w.turn:
		return !answered
	case <-w.ctx.Done():
	}
	g.mu.Lock()
	if i := slices.Index(g.waiting, w); i >= 0 {
		g.waiting = slices.Delete(g.waiting, i, i+1)
		g.mu.Unlock()
		w.err = fmt.Errorf("begin: %w", context.Cause(w.ctx))
		return false
	}
	g.mu.Unlock()
	// Taken already: answered soon, or to run the next transaction.
	return !<-w.turn
}

// take takes every waiting write.
func (s *backend) take() []*gathered {
	g := &s.gather
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.waiting
	g.waiting = nil
	return ws
}

// passOn hands the next transaction to the first write waiting, if any.
func (s *backend) passOn() {
	g := &s.gather
	g.mu.Lock()
	if len(g.waiting) == 0 {
		g.busy = false
		g.mu.Unlock()
		return
	}
	next := g.waiting[0]
	g.waiting = g.waiting[1:]
	g.mu.Unlock()
	next.turn <- false
}

// runGathered runs the writes of batch in one transaction, each under a
// savepoint, and sets each one's outcome.
func (s *backend) runGathered(batch []*gathered) {
	ctx := context.WithoutCancel(batch[0].ctx)
	err := s.txOn(ctx, s.db, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		for _, w := range batch {
			if w.err = context.Cause(w.ctx); w.err != nil {
				continue
			}
			if _, err := tx.ExecContext(ctx, "SAVEPOINT gathered"); err != nil {
				return err
			}
			if w.err = w.fn(context.WithoutCancel(w.ctx), tx, micros(s.clk.Now())); w.err != nil {
				if _, err := tx.ExecContext(ctx, "ROLLBACK TO gathered"); err != nil {
					// No transaction left to go on with.
					return errors.Join(w.err, err)
				}
			}
			if _, err := tx.ExecContext(ctx, "RELEASE gathered"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for _, w := range batch {
			w.err = err
		}
	}
}
