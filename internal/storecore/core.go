// Package storecore is what every backend of store.Store shares: the
// checks on input, the limits and defaults, the closed store, the error
// rule, counted releases, the order of reaped messages and this process's
// wake-ups. A backend writes only its transaction bodies, as a Backend, and
// New makes a store.Store of them.
//
// The package is internal: the three backends are the ones the module
// supports, and these rules change with them (a new state, a new column).
// A backend written elsewhere proves itself with store/storetest, which
// checks the same rules from outside.
package storecore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/store"
)

// Backend is a backend's own work. Store calls each method only while the
// store is open and with input it has checked and defaulted: messages with
// their MaxDeliveries set, completions' and failures' replies checked, a
// failure's error text cut to size and its reason set, a listing's limit
// set. Each method runs as one transaction (or under one lock), except
// Extend, which may take several.
//
// Errors are returned as they come: Store names the backend and the
// operation. A backend wakes this process's receivers (Wakeups.Notify)
// after Complete, Fail, Requeue and Cancel commit, since only it knows which
// queues they touched; Store wakes them after Enqueue, Reap, Redrive and
// Resume. A backend shared by several processes wakes theirs too.
type Backend interface {
	Enqueue(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error)
	Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error)
	Extend(ctx context.Context, leases []store.Lease, extension time.Duration) (store.Extended, error)
	Complete(ctx context.Context, cs []store.Completion) ([]error, error)
	Fail(ctx context.Context, f store.Failure) (dead bool, err error)
	// Requeue gives a claimed message back without counting its delivery
	// (store.Release with Uncount).
	Requeue(ctx context.Context, r store.Release) error
	// Reap returns the recovered messages in any order.
	Reap(ctx context.Context) ([]store.Recovered, error)
	Redrive(ctx context.Context, queue string, ids []int64) (int, error)
	Purge(ctx context.Context, queue string, ids []int64) (int, error)
	Stats(ctx context.Context, queue string) (store.Stats, error)
	Queues(ctx context.Context) ([]string, error)
	DeleteQueue(ctx context.Context, queue string) (int, error)
	// CreateQueue gets attrs as NewQueueAttributes returns them; it
	// returns the record with Queue set and Attributes never nil, as do
	// QueueInfo and SetQueueAttributes.
	CreateQueue(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, bool, error)
	// QueueInfo returns NoQueue(queue) for a queue without a record.
	QueueInfo(ctx context.Context, queue string) (store.QueueInfo, error)
	// SetQueueAttributes gets attrs checked, as the caller gave them; it
	// merges them into the record with MergeQueueAttributes and checks
	// the result with CheckMergedAttributes before it writes, and returns
	// NoQueue(queue) for a queue without a record.
	SetQueueAttributes(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, error)
	PurgeQueue(ctx context.Context, queue string) (int, error)
	// List gets a checked filter with its limit set. With f.BeforeID
	// positive it returns the messages in descending id order.
	List(ctx context.Context, f store.ListFilter) ([]store.Info, error)
	// Get returns NoMessage("", id) for an id that names no message.
	Get(ctx context.Context, id int64) (store.Info, error)
	// BlockedKeys gets its limit set.
	BlockedKeys(ctx context.Context, queue, afterKey string, limit int) ([]store.BlockedKey, error)
	Prune(ctx context.Context, p store.Prune) (int, error)
	// Cancel gets a queue of "" for any queue.
	Cancel(ctx context.Context, queue string, ids []int64) ([]int64, error)
	Pause(ctx context.Context, queue string) error
	Resume(ctx context.Context, queue string) error
	HoldMaintainer(ctx context.Context, holder string, d time.Duration) (store.Maintainer, error)
	ReleaseMaintainer(ctx context.Context, holder string, token int64) error
	Ping(ctx context.Context) error
	// Close is called once.
	Close() error
}

// Config names a backend and gives it the shared settings.
type Config struct {
	// Name prefixes the backend's errors, such as "sqlite store".
	Name string
	// Options, defaulted.
	Options store.Options
	// Wakeups are this process's receivers, which the backend also
	// notifies.
	Wakeups *Wakeups
}

// Store is a store.Store made of a Backend and the shared rules.
type Store struct {
	b    Backend
	name string
	opts store.Options
	wake *Wakeups
	// mu is held for reading by each operation and for writing by Close.
	mu     sync.RWMutex
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// New returns the store of a backend.
func New(cfg Config, b Backend) *Store {
	return &Store{b: b, name: cfg.Name, opts: cfg.Options, wake: cfg.Wakeups}
}

// Failed applies the error rule: the errors callers branch on (the
// store's own: a lost lease, a missing message, bad input, a closed store,
// a database that is not migrated) pass as they are, since they name their
// problem; any other is prefixed with the backend and the operation.
func (s *Store) Failed(op string, err error) error {
	if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrNotMigrated) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", s.name, op, err)
}

// Open reports store.ErrClosed once the store is closed.
func (s *Store) Open() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// CheckEnqueue checks messages for a backend's own enqueue in a caller's
// transaction, as Enqueue does, and returns them defaulted.
func (s *Store) CheckEnqueue(msgs []store.NewMessage) ([]store.NewMessage, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	return CheckNewMessages(msgs, s.opts)
}

// CheckList checks a listing for a backend's own listing in a caller's
// transaction, as List does, and returns it with its limit set.
func (s *Store) CheckList(f store.ListFilter) (store.ListFilter, error) {
	limit, err := CheckListFilter(f)
	if err != nil {
		return f, err
	}
	f.Limit = limit
	return f, s.Open()
}

// begin lets an operation in, unless the store is closed; end lets it
// out. Close waits for the operations in flight, so that none changes
// anything once Close has returned.
func (s *Store) begin() error {
	s.mu.RLock()
	if s.closed.Load() {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

func (s *Store) end() { s.mu.RUnlock() }

// beginOn checks a queue's name and lets an operation on it in.
func (s *Store) beginOn(queue string) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	return s.begin()
}

// Enqueue implements store.Store.
func (s *Store) Enqueue(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
	msgs, err := CheckNewMessages(msgs, s.opts)
	if err != nil {
		return nil, err
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.b.Enqueue(ctx, msgs)
	if err != nil {
		return nil, s.Failed("enqueue", err)
	}
	s.wake.NotifyMessages(msgs)
	return out, nil
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	if err := CheckClaim(c); err != nil {
		return nil, err
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.b.Claim(ctx, c)
	return out, s.Failed("claim", err)
}

// Extend implements store.Store.
func (s *Store) Extend(ctx context.Context, leases []store.Lease, extension time.Duration) (store.Extended, error) {
	if err := CheckExtend(leases, extension); err != nil {
		return store.Extended{}, err
	}
	if err := s.begin(); err != nil {
		return store.Extended{}, err
	}
	defer s.end()
	res, err := s.b.Extend(ctx, leases, extension)
	return res, s.Failed("extend", err)
}

// Complete implements store.Store.
func (s *Store) Complete(ctx context.Context, cs []store.Completion) ([]error, error) {
	replies, err := CheckCompletions(cs, s.opts)
	if err != nil {
		return nil, err
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	if replies != nil {
		// The backend sees the replies as checked, defaulted copies; the
		// caller's completions are left as they were.
		cs = slices.Clone(cs)
		for i := range cs {
			cs[i].Reply = replies[i]
		}
	}
	results, err := s.b.Complete(ctx, cs)
	if err != nil {
		return nil, s.Failed("complete", err)
	}
	return results, nil
}

// Fail implements store.Store.
func (s *Store) Fail(ctx context.Context, f store.Failure) (bool, error) {
	f, err := CheckFailure(f, s.opts)
	if err != nil {
		return false, err
	}
	if err := s.begin(); err != nil {
		return false, err
	}
	defer s.end()
	dead, err := s.b.Fail(ctx, f)
	return dead, s.Failed("fail", err)
}

// Release implements store.Store. A counted release is a failure with
// ReleasedError as its error: on the message's last delivery it
// dead-letters the message, like any failure.
func (s *Store) Release(ctx context.Context, r store.Release) error {
	if err := CheckRelease(r); err != nil {
		return err
	}
	if !r.Uncount {
		_, err := s.Fail(ctx, store.Failure{Lease: r.Lease, Error: store.ReleasedError, RetryDelay: r.Delay,
			Reason: store.ReasonMaxDeliveries})
		return err
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	return s.Failed("release", s.b.Requeue(ctx, r))
}

// Reap implements store.Store: the recovered messages come back by id.
func (s *Store) Reap(ctx context.Context) ([]store.Recovered, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.b.Reap(ctx)
	if err != nil {
		return nil, s.Failed("reap", err)
	}
	slices.SortFunc(out, func(a, b store.Recovered) int { return cmp.Compare(a.ID, b.ID) })
	for i, r := range out {
		if i == 0 || out[i-1].Queue != r.Queue {
			s.wake.Notify(r.Queue)
		}
	}
	return out, nil
}

// deadLetters checks the arguments of Redrive and Purge and lets the
// operation in (see begin).
func (s *Store) deadLetters(queue string, ids []int64) error {
	if err := CheckIDs(ids); err != nil {
		return err
	}
	return s.beginOn(queue)
}

// Redrive implements store.Store.
func (s *Store) Redrive(ctx context.Context, queue string, ids []int64) (int, error) {
	if err := s.deadLetters(queue, ids); err != nil {
		return 0, err
	}
	defer s.end()
	n, err := s.b.Redrive(ctx, queue, ids)
	if err != nil {
		return 0, s.Failed("redrive", err)
	}
	s.wake.Notify(queue)
	return n, nil
}

// Purge implements store.Store.
func (s *Store) Purge(ctx context.Context, queue string, ids []int64) (int, error) {
	if err := s.deadLetters(queue, ids); err != nil {
		return 0, err
	}
	defer s.end()
	n, err := s.b.Purge(ctx, queue, ids)
	return n, s.Failed("purge", err)
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context, queue string) (store.Stats, error) {
	if err := s.beginOn(queue); err != nil {
		return store.Stats{}, err
	}
	defer s.end()
	st, err := s.b.Stats(ctx, queue)
	return st, s.Failed("stats", err)
}

// Queues implements store.Store.
func (s *Store) Queues(ctx context.Context) ([]string, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.b.Queues(ctx)
	return out, s.Failed("queues", err)
}

// DeleteQueue implements store.Store.
func (s *Store) DeleteQueue(ctx context.Context, queue string) (int, error) {
	if err := s.beginOn(queue); err != nil {
		return 0, err
	}
	defer s.end()
	n, err := s.b.DeleteQueue(ctx, queue)
	return n, s.Failed("delete queue", err)
}

// CreateQueue implements store.Store.
func (s *Store) CreateQueue(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, bool, error) {
	if err := CheckQueue(queue); err != nil {
		return store.QueueInfo{}, false, err
	}
	if err := CheckQueueAttributes(attrs); err != nil {
		return store.QueueInfo{}, false, err
	}
	if err := s.begin(); err != nil {
		return store.QueueInfo{}, false, err
	}
	defer s.end()
	info, created, err := s.b.CreateQueue(ctx, queue, NewQueueAttributes(attrs))
	if err != nil {
		return store.QueueInfo{}, false, s.Failed("create queue", err)
	}
	return info, created, nil
}

// QueueInfo implements store.Store.
func (s *Store) QueueInfo(ctx context.Context, queue string) (store.QueueInfo, error) {
	if err := s.beginOn(queue); err != nil {
		return store.QueueInfo{}, err
	}
	defer s.end()
	info, err := s.b.QueueInfo(ctx, queue)
	if err != nil {
		return store.QueueInfo{}, s.Failed("queue info", err)
	}
	return info, nil
}

// SetQueueAttributes implements store.Store.
func (s *Store) SetQueueAttributes(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, error) {
	if err := CheckQueue(queue); err != nil {
		return store.QueueInfo{}, err
	}
	if err := CheckQueueAttributes(attrs); err != nil {
		return store.QueueInfo{}, err
	}
	if err := s.begin(); err != nil {
		return store.QueueInfo{}, err
	}
	defer s.end()
	info, err := s.b.SetQueueAttributes(ctx, queue, maps.Clone(attrs))
	if err != nil {
		return store.QueueInfo{}, s.Failed("set queue attributes", err)
	}
	return info, nil
}

// PurgeQueue implements store.Store.
func (s *Store) PurgeQueue(ctx context.Context, queue string) (int, error) {
	if err := s.beginOn(queue); err != nil {
		return 0, err
	}
	defer s.end()
	n, err := s.b.PurgeQueue(ctx, queue)
	return n, s.Failed("purge queue", err)
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, f store.ListFilter) ([]store.Info, error) {
	f, err := s.CheckList(f)
	if err != nil {
		return nil, err
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.b.List(ctx, f)
	return out, s.Failed("list", err)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id int64) (store.Info, error) {
	if err := s.begin(); err != nil {
		return store.Info{}, err
	}
	defer s.end()
	in, err := s.b.Get(ctx, id)
	if err != nil {
		return store.Info{}, s.Failed("get", err)
	}
	return in, nil
}

// BlockedKeys implements store.Store.
func (s *Store) BlockedKeys(ctx context.Context, queue, afterKey string, limit int) ([]store.BlockedKey, error) {
	limit, err := CheckBlockedKeys(queue, afterKey, limit)
	if err != nil {
		return nil, err
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.b.BlockedKeys(ctx, queue, afterKey, limit)
	if err != nil {
		return nil, s.Failed("blocked keys", err)
	}
	return out, nil
}

// Prune implements store.Store.
func (s *Store) Prune(ctx context.Context, p store.Prune) (int, error) {
	if err := CheckPrune(p); err != nil {
		return 0, err
	}
	if err := s.begin(); err != nil {
		return 0, err
	}
	defer s.end()
	n, err := s.b.Prune(ctx, p)
	return n, s.Failed("prune", err)
}

// Cancel implements store.Store.
func (s *Store) Cancel(ctx context.Context, queue string, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, invalid("no message ids to cancel")
	}
	if err := CheckIDs(ids); err != nil {
		return nil, err
	}
	if queue != "" {
		if err := CheckQueue(queue); err != nil {
			return nil, err
		}
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.b.Cancel(ctx, queue, ids)
	if err != nil {
		return nil, s.Failed("cancel", err)
	}
	return out, nil
}

// HoldMaintainer implements store.Store.
func (s *Store) HoldMaintainer(ctx context.Context, holder string, d time.Duration) (store.Maintainer, error) {
	if holder == "" {
		return store.Maintainer{}, invalid("the maintainer's holder is empty")
	}
	if err := CheckWorkerID(holder); err != nil {
		return store.Maintainer{}, err
	}
	if err := CheckLease(d); err != nil {
		return store.Maintainer{}, err
	}
	if err := s.begin(); err != nil {
		return store.Maintainer{}, err
	}
	defer s.end()
	m, err := s.b.HoldMaintainer(ctx, holder, d)
	return m, s.Failed("hold the maintainer lease", err)
}

// ReleaseMaintainer implements store.Store.
func (s *Store) ReleaseMaintainer(ctx context.Context, holder string, token int64) error {
	if err := CheckWorkerID(holder); err != nil {
		return err
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	return s.Failed("release the maintainer lease", s.b.ReleaseMaintainer(ctx, holder, token))
}

// Pause implements store.Store.
func (s *Store) Pause(ctx context.Context, queue string) error {
	if err := s.beginOn(queue); err != nil {
		return err
	}
	defer s.end()
	return s.Failed("pause", s.b.Pause(ctx, queue))
}

// Resume implements store.Store.
func (s *Store) Resume(ctx context.Context, queue string) error {
	if err := s.beginOn(queue); err != nil {
		return err
	}
	defer s.end()
	if err := s.b.Resume(ctx, queue); err != nil {
		return s.Failed("resume", err)
	}
	s.wake.Notify(queue)
	return nil
}

// Wakeup implements store.Store.
func (s *Store) Wakeup(queue string) <-chan struct{} { return s.wake.Wakeup(queue) }

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	return s.b.Ping(ctx)
}

// Close waits for the operations in flight, closes the backend once and
// wakes every receiver, so that none waits on a closed store. Later
// operations return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed.Swap(true)
	s.mu.Unlock()
	if already {
		return nil
	}
	err := s.b.Close()
	s.wake.NotifyAll()
	return err
}
