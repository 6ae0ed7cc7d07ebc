// Package storecore is what every backend of store.Store shares: the
// checks on input, the limits and defaults, the closed store, the error
// rule, this process's wake-ups, and the state machine of a claimed
// message (settle.go): what completing, failing, reaping and cancelling
// do, written once over the primitives each backend runs inside its own
// transaction. A backend writes only its transaction bodies, as a Backend,
// and New makes a store.Store of them.
//
// The package is internal: the three backends are the ones the module
// supports, and these rules change with them (a new state, a new column).
// A backend written elsewhere proves itself with store/storetest, which
// checks the same rules from outside.
package storecore

import (
	"cmp"
	"context"
	"crypto/rand"
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
// operation. Store wakes this process's receivers (Wakeups.Notify) after
// Enqueue, Redrive, Resume and what it settles. A backend shared by
// several processes wakes theirs too.
type Backend interface {
	Enqueue(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error)
	Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error)
	Extend(ctx context.Context, leases []store.Lease, extension time.Duration) (store.Extended, error)
	// Settle runs st in one transaction (or under one lock) and commits
	// what it did when it returns nil; nothing when it returns an error.
	// Complete, Fail, Reap and Cancel are written once as Settlements (see
	// settle.go).
	Settle(ctx context.Context, st Settlement) error
	Redrive(ctx context.Context, queue string, ids []int64) (int, error)
	Purge(ctx context.Context, queue string, ids []int64) (int, error)
	Stats(ctx context.Context, queue string) (store.Stats, error)
	Queues(ctx context.Context) ([]string, error)
	AllStats(ctx context.Context) ([]store.Stats, error)
	// QueuePage gets a limit from 1 to MaxBatch and at most one of after
	// and before.
	QueuePage(ctx context.Context, after, before string, limit int) ([]string, error)
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
	// Scheduled gets a checked queue and its limit set.
	Scheduled(ctx context.Context, queue string, after store.ScheduledAfter, limit int) ([]store.Info, error)
	Throughput(ctx context.Context, queue string, since time.Time) ([]store.Minute, error)
	// PruneThroughput gets an age of at least store.ThroughputWindow.
	PruneThroughput(ctx context.Context, olderThan time.Duration) (int, error)
	Pause(ctx context.Context, queue string) error
	Resume(ctx context.Context, queue string) error
	HoldMaintainer(ctx context.Context, holder string, d time.Duration) (store.Maintainer, error)
	ReleaseMaintainer(ctx context.Context, holder string, token int64) error
	Ping(ctx context.Context) error
	CheckWrite(ctx context.Context) error
	// ServerSecret gets a checked name and fresh, random bytes of
	// ServerSecretSize: it keeps them when the name has no secret yet,
	// atomically, and returns the name's secret either way.
	ServerSecret(ctx context.Context, name string, fresh []byte) ([]byte, error)
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
// a database that is not migrated, a processing message refused) pass as
// they are, since they name their problem; any other is prefixed with the backend and the operation.
func (s *Store) Failed(op string, err error) error {
	if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrNotMigrated) ||
		errors.Is(err, store.ErrProcessing) {
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

// run runs one operation of the backend, whose input the caller has
// checked (check's error, when not nil, is returned first and nothing
// runs): it lets the operation in (see begin) and applies the error rule
// (see Failed) with op naming it.
func run[T any](s *Store, op string, check error, fn func() (T, error)) (T, error) {
	var zero T
	if check != nil {
		return zero, check
	}
	if err := s.begin(); err != nil {
		return zero, err
	}
	defer s.end()
	v, err := fn()
	if err != nil {
		return zero, s.Failed(op, err)
	}
	return v, nil
}

// settle runs st in one of the backend's settling transactions, as run
// runs an operation, and wakes the queues it noted once it has committed.
func (s *Store) settle(ctx context.Context, op string, check error, st Settlement) error {
	_, err := run(s, op, check, func() (struct{}, error) { return struct{}{}, s.b.Settle(ctx, st) })
	if err == nil {
		for _, q := range distinct(st.woken()) {
			s.wake.Notify(q)
		}
	}
	return err
}

// Enqueue implements store.Store.
func (s *Store) Enqueue(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
	msgs, err := CheckNewMessages(msgs, s.opts)
	out, err := run(s, "enqueue", err, func() ([]store.Enqueued, error) { return s.b.Enqueue(ctx, msgs) })
	if err == nil {
		s.wake.NotifyMessages(msgs)
	}
	return out, err
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	return run(s, "claim", CheckClaim(c), func() ([]store.Delivery, error) { return s.b.Claim(ctx, c) })
}

// Extend implements store.Store.
func (s *Store) Extend(ctx context.Context, leases []store.Lease, extension time.Duration) (store.Extended, error) {
	return run(s, "extend", CheckExtend(leases, extension), func() (store.Extended, error) {
		return s.b.Extend(ctx, leases, extension)
	})
}

// Complete implements store.Store.
func (s *Store) Complete(ctx context.Context, cs []store.Completion) ([]error, error) {
	replies, err := CheckCompletions(cs, s.opts)
	if replies != nil {
		// The backend sees the replies as checked, defaulted copies; the
		// caller's completions are left as they were.
		cs = slices.Clone(cs)
		for i := range cs {
			cs[i].Reply = replies[i]
		}
	}
	c := &completion{cs: cs, results: make([]error, len(cs))}
	if err := s.settle(ctx, "complete", err, c); err != nil {
		return nil, err
	}
	return c.results, nil
}

// Fail implements store.Store.
func (s *Store) Fail(ctx context.Context, f store.Failure) (bool, error) {
	f, err := CheckFailure(f, s.opts)
	fl := &failure{f: f}
	err = s.settle(ctx, "fail", err, fl)
	return fl.dead && err == nil, err
}

// Release implements store.Store. A counted release is a failure with
// ReleasedError as its error: on the message's last delivery it
// dead-letters the message, like any failure. A late one never does.
func (s *Store) Release(ctx context.Context, r store.Release) error {
	if err := CheckRelease(r); err != nil {
		return err
	}
	if !r.Uncount && !r.Late {
		_, err := s.Fail(ctx, store.Failure{Lease: r.Lease, Error: store.ReleasedError, RetryDelay: r.Delay,
			Reason: store.ReasonMaxDeliveries})
		return err
	}
	return s.settle(ctx, "release", nil, &release{r: r})
}

// Reap implements store.Store: the recovered messages come back by id.
func (s *Store) Reap(ctx context.Context) ([]store.Recovered, error) {
	rp := &reaping{}
	if err := s.settle(ctx, "reap", nil, rp); err != nil {
		return nil, err
	}
	slices.SortFunc(rp.recovered, func(a, b store.Recovered) int { return cmp.Compare(a.ID, b.ID) })
	return rp.recovered, nil
}

// checkDeadLetters checks the arguments of Redrive and Purge.
func checkDeadLetters(queue string, ids []int64) error {
	return cmp.Or(CheckIDs(ids), CheckQueue(queue))
}

// Redrive implements store.Store.
func (s *Store) Redrive(ctx context.Context, queue string, ids []int64) (int, error) {
	n, err := run(s, "redrive", checkDeadLetters(queue, ids), func() (int, error) { return s.b.Redrive(ctx, queue, ids) })
	if err == nil {
		s.wake.Notify(queue)
	}
	return n, err
}

// checkByID checks the ids of Rerun and Delete.
func checkByID(op string, ids []int64) error {
	if len(ids) == 0 {
		return invalid("no message ids to %s", op)
	}
	return CheckIDs(ids)
}

// Rerun implements store.Store.
func (s *Store) Rerun(ctx context.Context, ids []int64) error {
	return s.settle(ctx, "rerun", checkByID("rerun", ids), &rerunning{ids: ids})
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, ids []int64) error {
	return s.settle(ctx, "delete", checkByID("delete", ids), &deleting{ids: ids})
}

// Move implements store.Store.
func (s *Store) Move(ctx context.Context, m store.Move) (int, error) {
	m, err := CheckMove(m)
	mv := &moving{m: m}
	err = s.settle(ctx, "move", err, mv)
	return mv.moved, err
}

// Purge implements store.Store.
func (s *Store) Purge(ctx context.Context, queue string, ids []int64) (int, error) {
	return run(s, "purge", checkDeadLetters(queue, ids), func() (int, error) { return s.b.Purge(ctx, queue, ids) })
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context, queue string) (store.Stats, error) {
	return run(s, "stats", CheckQueue(queue), func() (store.Stats, error) { return s.b.Stats(ctx, queue) })
}

// Queues implements store.Store.
func (s *Store) Queues(ctx context.Context) ([]string, error) {
	return run(s, "queues", nil, func() ([]string, error) { return s.b.Queues(ctx) })
}

// AllStats implements store.Store.
func (s *Store) AllStats(ctx context.Context) ([]store.Stats, error) {
	return run(s, "all stats", nil, func() ([]store.Stats, error) { return s.b.AllStats(ctx) })
}

// QueuePage implements store.Store.
func (s *Store) QueuePage(ctx context.Context, after, before string, limit int) ([]string, error) {
	var check error
	switch {
	case limit < 1 || limit > store.MaxBatch:
		check = invalid("queue page limit %d is not 1 to %d", limit, store.MaxBatch)
	case after != "" && before != "":
		check = invalid("a queue page is after a name or before one, not both (%q, %q)", after, before)
	}
	return run(s, "queue page", check, func() ([]string, error) { return s.b.QueuePage(ctx, after, before, limit) })
}

// DeleteQueue implements store.Store.
func (s *Store) DeleteQueue(ctx context.Context, queue string) (int, error) {
	return run(s, "delete queue", CheckQueue(queue), func() (int, error) { return s.b.DeleteQueue(ctx, queue) })
}

// CreateQueue implements store.Store.
func (s *Store) CreateQueue(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, bool, error) {
	type created struct {
		info store.QueueInfo
		made bool
	}
	c, err := run(s, "create queue", cmp.Or(CheckQueue(queue), CheckQueueAttributes(attrs)), func() (created, error) {
		info, made, err := s.b.CreateQueue(ctx, queue, NewQueueAttributes(attrs))
		return created{info, made}, err
	})
	return c.info, c.made, err
}

// QueueInfo implements store.Store.
func (s *Store) QueueInfo(ctx context.Context, queue string) (store.QueueInfo, error) {
	return run(s, "queue info", CheckQueue(queue), func() (store.QueueInfo, error) { return s.b.QueueInfo(ctx, queue) })
}

// SetQueueAttributes implements store.Store.
func (s *Store) SetQueueAttributes(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, error) {
	return run(s, "set queue attributes", cmp.Or(CheckQueue(queue), CheckQueueAttributes(attrs)), func() (store.QueueInfo, error) {
		return s.b.SetQueueAttributes(ctx, queue, maps.Clone(attrs))
	})
}

// PurgeQueue implements store.Store.
func (s *Store) PurgeQueue(ctx context.Context, queue string) (int, error) {
	return run(s, "purge queue", CheckQueue(queue), func() (int, error) { return s.b.PurgeQueue(ctx, queue) })
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, f store.ListFilter) ([]store.Info, error) {
	limit, err := CheckListFilter(f)
	f.Limit = limit
	return run(s, "list", err, func() ([]store.Info, error) { return s.b.List(ctx, f) })
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id int64) (store.Info, error) {
	return run(s, "get", nil, func() (store.Info, error) { return s.b.Get(ctx, id) })
}

// BlockedKeys implements store.Store.
func (s *Store) BlockedKeys(ctx context.Context, queue, afterKey string, limit int) ([]store.BlockedKey, error) {
	limit, err := CheckBlockedKeys(queue, afterKey, limit)
	return run(s, "blocked keys", err, func() ([]store.BlockedKey, error) { return s.b.BlockedKeys(ctx, queue, afterKey, limit) })
}

// Prune implements store.Store.
func (s *Store) Prune(ctx context.Context, p store.Prune) (int, error) {
	return run(s, "prune", CheckPrune(p), func() (int, error) { return s.b.Prune(ctx, p) })
}

// Scheduled implements store.Store.
func (s *Store) Scheduled(ctx context.Context, queue string, after store.ScheduledAfter, limit int) ([]store.Info, error) {
	limit, err := CheckScheduled(queue, after, limit)
	return run(s, "scheduled", err, func() ([]store.Info, error) { return s.b.Scheduled(ctx, queue, after, limit) })
}

// Throughput implements store.Store.
func (s *Store) Throughput(ctx context.Context, queue string, since time.Time) ([]store.Minute, error) {
	return run(s, "throughput", CheckQueue(queue), func() ([]store.Minute, error) { return s.b.Throughput(ctx, queue, since) })
}

// PruneThroughput implements store.Store.
func (s *Store) PruneThroughput(ctx context.Context, olderThan time.Duration) (int, error) {
	return run(s, "prune throughput", CheckPruneThroughput(olderThan), func() (int, error) { return s.b.PruneThroughput(ctx, olderThan) })
}

// Cancel implements store.Store.
func (s *Store) Cancel(ctx context.Context, queue string, ids []int64) ([]int64, error) {
	check := CheckIDs(ids)
	if len(ids) == 0 {
		check = invalid("no message ids to cancel")
	}
	if queue != "" {
		check = cmp.Or(check, CheckQueue(queue))
	}
	cn := &cancellation{queue: queue, ids: ids}
	if err := s.settle(ctx, "cancel", check, cn); err != nil {
		return nil, err
	}
	if len(cn.cancelled) > 0 {
		s.wake.NotifyCancellation()
	}
	return cn.cancelled, nil
}

// HoldMaintainer implements store.Store.
func (s *Store) HoldMaintainer(ctx context.Context, holder string, d time.Duration) (store.Maintainer, error) {
	check := cmp.Or(CheckWorkerID(holder), CheckLease(d))
	if holder == "" {
		check = invalid("the maintainer's holder is empty")
	}
	return run(s, "hold the maintainer lease", check, func() (store.Maintainer, error) { return s.b.HoldMaintainer(ctx, holder, d) })
}

// ReleaseMaintainer implements store.Store.
func (s *Store) ReleaseMaintainer(ctx context.Context, holder string, token int64) error {
	return only(run(s, "release the maintainer lease", CheckWorkerID(holder), func() (struct{}, error) {
		return struct{}{}, s.b.ReleaseMaintainer(ctx, holder, token)
	}))
}

// Pause implements store.Store.
func (s *Store) Pause(ctx context.Context, queue string) error {
	return only(run(s, "pause", CheckQueue(queue), func() (struct{}, error) { return struct{}{}, s.b.Pause(ctx, queue) }))
}

// Resume implements store.Store.
func (s *Store) Resume(ctx context.Context, queue string) error {
	err := only(run(s, "resume", CheckQueue(queue), func() (struct{}, error) { return struct{}{}, s.b.Resume(ctx, queue) }))
	if err == nil {
		s.wake.Notify(queue)
	}
	return err
}

// only returns the error of an operation that has no result.
func only(_ struct{}, err error) error { return err }

// Wakeup implements store.Store.
func (s *Store) Wakeup(queue string) <-chan struct{} { return s.wake.Wakeup(queue) }

// CancelWakeup implements store.Store.
func (s *Store) CancelWakeup() <-chan struct{} { return s.wake.Cancellation() }

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	return s.b.Ping(ctx) // the connection's own error, as it comes
}

// CheckWrite implements store.Store.
func (s *Store) CheckWrite(ctx context.Context) error {
	return only(run(s, "check a write", nil, func() (struct{}, error) { return struct{}{}, s.b.CheckWrite(ctx) }))
}

// ServerSecretSize is the length of a server secret.
const ServerSecretSize = 32

// maxSecretName bounds a server secret's name.
const maxSecretName = 80

// ServerSecret implements store.Store.
func (s *Store) ServerSecret(ctx context.Context, name string) ([]byte, error) {
	var check error
	if name == "" || len(name) > maxSecretName {
		check = invalid("a server secret's name is 1 to %d bytes, not %d", maxSecretName, len(name))
	}
	return run(s, "read the server secret", check, func() ([]byte, error) {
		fresh := make([]byte, ServerSecretSize)
		if _, err := rand.Read(fresh); err != nil {
			return nil, err
		}
		return s.b.ServerSecret(ctx, name, fresh)
	})
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
