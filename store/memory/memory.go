// Package memory is an in-memory store.Store: the reference backend, for
// tests and for programs whose messages need not survive the process. It
// runs on an injected clock and can run its own reaper loop.
package memory

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// Config configures a Store. The zero value uses every default.
type Config struct {
	// Clock is the store's time authority. Default: the system clock.
	Clock clock.Clock
	// Options are the settings every backend shares.
	Options store.Options
	// ReapInterval, when positive, makes the store run its own reaper every
	// ReapInterval on Clock until Close. Zero: no reaper loop; call Reap.
	ReapInterval time.Duration
}

// Store is an in-memory store.Store.
type Store struct {
	store.Store
}

// backend holds the messages; storecore checks what reaches it.
type backend struct {
	wake *storecore.Wakeups
	clk  clock.Clock
	opts store.Options

	mu    sync.Mutex
	fence int64
	// msgs[i] is the message with id firstID+i, nil once deleted. Ids are
	// dense, so a slice beats a map; deleted messages at the front are
	// trimmed.
	msgs    []*message
	firstID int64
	// arrivals counts the messages that arrived in a queue, enqueued or
	// moved there: each message's arrival is its place in its key's line.
	arrivals int64
	queues   map[string]*queue
	paused   map[string]bool
	records  map[string]*record
	// unique holds the messages of each unique key, in id order.
	unique map[string][]*message
	maint  store.Maintainer
	// secrets are the server secrets by name.
	secrets map[string][]byte
	// throughput holds each queue's counts by Unix minute (see
	// store.Store.Throughput).
	throughput map[string]map[int64]*store.Minute
	// settling is the state of the settling step that holds mu.
	settling settleState

	stopReaper context.CancelFunc
	reaperDone chan struct{}
}

var _ store.Store = (*Store)(nil)

type message struct {
	id         int64
	queue      *queue
	key        string
	dedupID    string
	replyTo    string
	kind       string
	priority   int
	payload    []byte
	attributes []byte // nil for none
	state      store.State
	deliveries int
	maxDeliv   int
	fence      int64
	worker     string
	lastError  string
	deadReason store.DeadReason
	// Times are Unix nanoseconds: smaller than time.Time and cheaper to
	// compare, on a path that runs for every message.
	enqueuedAt  int64
	visibleAt   int64
	lockedUntil int64 // zero unless processing
	finishedAt  int64 // zero unless completed or dead
	// firstClaimedAt is zero until the first claim.
	firstClaimedAt int64
	// dlq is the queue the message moves to when it dies, empty for
	// none; dlSource the queue it was dead-lettered from, empty for none.
	dlq, dlSource string
	// fairGroup is the fairness group it was enqueued for, empty for none.
	fairGroup string
	// uniqueKey is its unique key, empty for none.
	uniqueKey string
	// errors is its error history, oldest first, at most store.MaxErrors.
	errors []store.AttemptError
	// snoozes counts its snoozes (store.Info.Snoozes).
	snoozes int
	// independent says its last claim gave it an independent lease (see
	// store.Claim).
	independent bool
	// arrival is the message's place in its key's line: the arrivals
	// count when it was enqueued or last moved to another queue, so
	// that a moved message goes after every message of its key there.
	arrival int64
	// heapIndex is the message's place in its queue's delayed or ready
	// heap (inReady says which); -1 when in neither.
	heapIndex int
	inReady   bool
}

type queue struct {
	name string
	// Pending messages wait in delayed, by visibility, until a claim finds
	// them visible and moves them to ready, by priority: a delayed message
	// of high priority must not hide the visible ones behind it.
	delayed    pendingHeap
	ready      pendingHeap
	processing map[int64]*message
	keys       map[string]*keyLine
	dedup      map[string]*message
	completed  []*message // in order of completion, for retention
	counts     [store.States]int64
}

// record is a queue's record (see store.Store.CreateQueue).
type record struct {
	attrs                map[string]string
	createdAt, updatedAt time.Time
}

// keyLine holds a key's unfinished messages, each list by arrival: those
// that run (the head, pending or processing, and the rest of its run,
// processing) and the ones waiting behind them.
type keyLine struct {
	running []*message
	waiting []*message
}

// processingAfter returns the arrival of the line's first processing
// message after arrival a; math.MaxInt64 when there is none.
func (line *keyLine) processingAfter(a int64) int64 {
	for _, r := range line.running {
		if r.state == store.Processing && r.arrival > a {
			return r.arrival
		}
	}
	return math.MaxInt64
}

// insertByArrival adds m to ms, kept in order of arrival.
func insertByArrival(ms []*message, m *message) []*message {
	i, _ := slices.BinarySearchFunc(ms, m.arrival, func(w *message, a int64) int { return cmp.Compare(w.arrival, a) })
	return slices.Insert(ms, i, m)
}

// removeMessage takes m out of ms, if it is there.
func removeMessage(ms []*message, m *message) []*message {
	return slices.DeleteFunc(ms, func(w *message) bool { return w == m })
}

// New returns an empty store.
func New(cfg Config) (*Store, error) {
	if err := cfg.Options.Validate(); err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	if cfg.ReapInterval < 0 {
		return nil, fmt.Errorf("memory store: %w: ReapInterval is %s, must not be negative", store.ErrInvalid, cfg.ReapInterval)
	}
	b := &backend{
		wake:    new(storecore.Wakeups),
		clk:     clock.OrSystem(cfg.Clock),
		opts:    cfg.Options.WithDefaults(),
		firstID: 1,
		queues:  make(map[string]*queue),
		paused:  make(map[string]bool),
		unique:  make(map[string][]*message),
		records: make(map[string]*record),
	}
	s := &Store{storecore.New(storecore.Config{Name: "memory store", Options: b.opts, Wakeups: b.wake}, b)}
	if cfg.ReapInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		b.stopReaper, b.reaperDone = cancel, make(chan struct{})
		go b.reapLoop(ctx, cfg.ReapInterval, s)
	}
	return s, nil
}

// reapLoop reaps through st, the checked store, so that recoveries wake
// their receivers.
func (s *backend) reapLoop(ctx context.Context, every time.Duration, st store.Store) {
	defer close(s.reaperDone)
	t := s.clk.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			// Reap only fails once the store is closed, which ends the loop.
			if _, err := st.Reap(ctx); err != nil {
				return
			}
		}
	}
}

func (s *backend) DeleteQueue(ctx context.Context, queue string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.paused, queue)
	delete(s.records, queue)
	return s.purgeLocked(queue), nil
}

// PurgeQueue deletes the queue's messages and keeps its record and pause.
func (s *backend) PurgeQueue(ctx context.Context, queue string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.purgeLocked(queue), nil
}

// purgeLocked deletes every message of the queue, and with them its
// counts, keys, dedup ids and unique keys, and returns how many.
func (s *backend) purgeLocked(queue string) int {
	q, ok := s.queues[queue]
	if !ok {
		return 0
	}
	n := 0
	for _, m := range s.msgs {
		if m != nil && m.queue == q {
			s.deleteLocked(m)
			n++
		}
	}
	delete(s.queues, queue)
	s.trimLocked()
	return n
}

func (s *backend) CreateQueue(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[queue]; ok {
		return s.recordLocked(queue), false, nil
	}
	now := wall(s.clk.Now().UnixNano())
	s.records[queue] = &record{attrs: maps.Clone(attrs), createdAt: now, updatedAt: now}
	return s.recordLocked(queue), true, nil
}

func (s *backend) QueueInfo(ctx context.Context, queue string) (store.QueueInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[queue]; !ok {
		return store.QueueInfo{}, storecore.NoQueue(queue)
	}
	return s.recordLocked(queue), nil
}

func (s *backend) SetQueueAttributes(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[queue]
	if !ok {
		return store.QueueInfo{}, storecore.NoQueue(queue)
	}
	merged := storecore.MergeQueueAttributes(r.attrs, attrs)
	if err := storecore.CheckMergedAttributes(queue, merged); err != nil {
		return store.QueueInfo{}, err
	}
	r.attrs, r.updatedAt = merged, wall(s.clk.Now().UnixNano())
	return s.recordLocked(queue), nil
}

// recordLocked returns a copy of the queue's record, which exists.
func (s *backend) recordLocked(queue string) store.QueueInfo {
	r := s.records[queue]
	attrs := maps.Clone(r.attrs)
	if attrs == nil {
		attrs = map[string]string{}
	}
	return store.QueueInfo{Queue: queue, Paused: s.paused[queue], Attributes: attrs, CreatedAt: r.createdAt, UpdatedAt: r.updatedAt}
}

func (s *backend) Queues(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueNames(), nil
}

func (s *backend) QueuePage(_ context.Context, after, before string, limit int) ([]string, error) {
	s.mu.Lock()
	names := s.queueNames()
	s.mu.Unlock()
	if before != "" {
		to, _ := slices.BinarySearch(names, before)
		return names[max(to-limit, 0):to], nil
	}
	from, found := slices.BinarySearch(names, after)
	if found {
		from++
	}
	return names[from:min(from+limit, len(names))], nil
}

// queueNames lists the queues, sorted, under s.mu.
func (s *backend) queueNames() []string {
	names := make(map[string]bool)
	// A queue's counts say whether it holds messages: no need to read them.
	for name, q := range s.queues {
		for _, n := range q.counts {
			if n > 0 {
				names[name] = true
				break
			}
		}
	}
	for q := range s.paused {
		names[q] = true
	}
	for q := range s.records {
		names[q] = true
	}
	return slices.Sorted(maps.Keys(names))
}

func (s *backend) HoldMaintainer(ctx context.Context, holder string, d time.Duration) (store.Maintainer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	switch {
	case s.maint.Holder == holder && now.Before(s.maint.Expires):
	case s.maint.Holder == "" || s.maint.Holder == holder || !now.Before(s.maint.Expires):
		s.maint.Token++
	default:
		return s.maint, nil
	}
	s.maint.Holder, s.maint.Expires = holder, now.Add(d).UTC()
	return s.maint, nil
}

func (s *backend) ReleaseMaintainer(ctx context.Context, holder string, token int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maint.Holder == holder && s.maint.Token == token {
		s.maint.Expires = time.Time{}
	}
	return nil
}

func (s *backend) Pause(ctx context.Context, queue string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused[queue] = true
	return nil
}

func (s *backend) Resume(ctx context.Context, queue string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.paused, queue)
	return nil
}

// Ping has nothing to reach: the store is open.
func (s *backend) Ping(context.Context) error { return nil }

// CheckWrite has nothing to prove: memory takes every write.
func (s *backend) CheckWrite(context.Context) error { return nil }

func (s *backend) ServerSecret(_ context.Context, name string, fresh []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secrets == nil {
		s.secrets = map[string][]byte{}
	}
	if _, ok := s.secrets[name]; !ok {
		s.secrets[name] = fresh
	}
	return slices.Clone(s.secrets[name]), nil
}

// Close stops the reaper loop.
func (s *backend) Close() error {
	if s.stopReaper != nil {
		s.stopReaper()
		<-s.reaperDone
	}
	return nil
}

func (s *backend) queueLocked(name string) *queue {
	q, ok := s.queues[name]
	if !ok {
		q = &queue{
			name:       name,
			ready:      pendingHeap{ready: true},
			processing: make(map[int64]*message),
			keys:       make(map[string]*keyLine),
			dedup:      make(map[string]*message),
		}
		s.queues[name] = q
	}
	return q
}

func (q *queue) setState(m *message, st store.State) {
	q.counts[m.state]--
	q.counts[st]++
	m.state = st
}

func (s *backend) Enqueue(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Enqueued, len(msgs))
	now := s.clk.Now().UnixNano()
	for i := range msgs {
		out[i] = s.enqueueLocked(&msgs[i], now)
	}
	return out, nil
}

func (s *backend) enqueueLocked(nm *store.NewMessage, now int64) store.Enqueued {
	q := s.queueLocked(nm.Queue)
	if nm.UniqueKey != "" {
		for _, prev := range s.unique[nm.UniqueKey] {
			if slices.Contains(nm.UniqueStates, prev.state) {
				return store.Enqueued{ID: prev.id, Duplicate: true}
			}
		}
	}
	if nm.DedupID != "" {
		if prev, ok := q.dedup[nm.DedupID]; ok && now < prev.enqueuedAt+int64(s.opts.DedupWindow) {
			return store.Enqueued{ID: prev.id, Duplicate: true}
		}
	}
	m := &message{
		id:         s.firstID + int64(len(s.msgs)),
		queue:      q,
		key:        nm.Key,
		dedupID:    nm.DedupID,
		replyTo:    nm.ReplyTo,
		kind:       nm.Kind,
		priority:   nm.Priority,
		payload:    slices.Clone(nm.Payload),
		attributes: slices.Clone(nm.Attributes),
		maxDeliv:   nm.MaxDeliveries,
		dlq:        nm.DeadLetterQueue,
		enqueuedAt: now,
		visibleAt:  now + int64(nm.Delay),
		heapIndex:  -1,
		state:      store.Pending,
		fairGroup:  nm.FairGroup,
	}
	if m.fairGroup != "" && nm.Delay == 0 {
		m.visibleAt = q.placeFair(m, now)
	}
	if m.payload == nil {
		m.payload = []byte{}
	}
	s.arrivals++
	m.arrival = s.arrivals
	s.msgs = append(s.msgs, m)
	q.counts[store.Pending]++
	if m.dedupID != "" {
		q.dedup[m.dedupID] = m
	}
	if nm.UniqueKey != "" {
		m.uniqueKey = nm.UniqueKey
		s.unique[m.uniqueKey] = append(s.unique[m.uniqueKey], m)
	}
	s.lineUpLocked(m, now)
	return store.Enqueued{ID: m.id}
}

// lineUpLocked makes a new or redriven pending message claimable, or puts it
// behind its key's unfinished messages.
func (s *backend) lineUpLocked(m *message, now int64) {
	q := m.queue
	if m.key != "" {
		line, ok := q.keys[m.key]
		if !ok {
			q.keys[m.key] = &keyLine{running: []*message{m}}
		} else {
			line.waiting = insertByArrival(line.waiting, m)
			q.setState(m, store.Waiting)
			return
		}
	}
	q.pushPending(m, now)
}

// finishLocked moves a claimed or pending message to a terminal state. It
// leaves its key's line; Promote lets the next one go once none runs.
func (s *backend) finishLocked(m *message, st store.State, now int64) {
	q := m.queue
	delete(q.processing, m.id)
	q.removePending(m)
	q.setState(m, st)
	m.finishedAt = now
	m.lockedUntil = 0
	if st == store.Completed {
		q.completed = append(q.completed, m)
	}
	if m.key == "" {
		return
	}
	if line := q.keys[m.key]; line != nil {
		line.running = removeMessage(line.running, m)
		if len(line.running) == 0 && len(line.waiting) == 0 {
			delete(q.keys, m.key)
		}
	}
}

// EnqueueTx enqueues msgs at once: the memory store has no transactions.
// It makes the store a store.TxStore, for code written for any store.
func (s *Store) EnqueueTx(ctx context.Context, _ store.NoTx, msgs []store.NewMessage) ([]store.Enqueued, error) {
	return s.Enqueue(ctx, msgs)
}

// ListTx is List: the memory store has no transactions.
func (s *Store) ListTx(ctx context.Context, _ store.NoTx, f store.ListFilter) ([]store.Info, error) {
	return s.List(ctx, f)
}

func (s *backend) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[c.Queue]
	if !ok || s.paused[c.Queue] {
		return nil, nil
	}
	now := s.clk.Now().UnixNano()
	until := now + int64(c.LeaseDuration)
	var out []store.Delivery
	q.makeVisible(now)
	claim := func(m *message) {
		s.fence++
		m.fence = s.fence
		m.deliveries++
		m.worker = c.WorkerID
		m.lockedUntil = until
		m.independent = c.Independent
		if m.firstClaimedAt == 0 {
			m.firstClaimedAt = now
		}
		q.setState(m, store.Processing)
		q.processing[m.id] = m
		if out == nil {
			out = make([]store.Delivery, 0, min(c.Max, len(q.ready.ms)+1))
		}
		out = append(out, store.Delivery{
			Lease:            store.Lease{MessageID: m.id, FencingToken: m.fence},
			Queue:            q.name,
			Key:              m.key,
			Payload:          m.payload,
			ReplyTo:          m.replyTo,
			DedupID:          m.dedupID,
			Kind:             m.kind,
			Priority:         m.priority,
			Attempt:          m.deliveries,
			MaxDeliveries:    m.maxDeliv,
			EnqueuedAt:       wall(m.enqueuedAt),
			LeaseExpires:     wall(until),
			Attributes:       m.attributes,
			FirstClaimedAt:   wall(m.firstClaimedAt),
			DeadLetterSource: m.dlSource,
		})
	}
	for len(out) < c.Max && len(q.ready.ms) > 0 {
		m := heap.Pop(&q.ready).(*message)
		claim(m)
		if !c.Runs || m.key == "" {
			continue
		}
		// The rest of its run: the key's next messages, in order, while
		// they are visible and come before the first of the key's
		// messages after it that is processing.
		line := q.keys[m.key]
		stop := line.processingAfter(m.arrival)
		for len(out) < c.Max && len(line.waiting) > 0 && line.waiting[0].visibleAt <= now && line.waiting[0].arrival < stop {
			next := line.waiting[0]
			line.waiting = line.waiting[1:]
			line.running = insertByArrival(line.running, next)
			claim(next)
		}
	}
	return out, nil
}

// currentLocked returns the message a lease names if the lease is current.
func (s *backend) currentLocked(l store.Lease, now int64) (*message, error) {
	m := s.byIDLocked(l.MessageID)
	if m == nil || m.state != store.Processing || m.fence != l.FencingToken || now >= m.lockedUntil {
		return nil, store.LeaseLost(l)
	}
	return m, nil
}

func (s *backend) Extend(ctx context.Context, leases []store.Lease, extension time.Duration) (store.Extended, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now().UnixNano()
	until := now + int64(extension)
	res := store.Extended{Expires: wall(until)}
	for _, l := range leases {
		m, err := s.currentLocked(l, now)
		if err != nil {
			res.Lost = append(res.Lost, l)
			if m := s.byIDLocked(l.MessageID); m != nil && m.state == store.Cancelled && m.fence == l.FencingToken {
				res.Cancelled = append(res.Cancelled, l)
			}
			continue
		}
		m.lockedUntil = until
	}
	return res, nil
}

// requeueLocked returns a processing message to pending, keeping its place
// as its key's head.
func (s *backend) requeueLocked(m *message, visibleAt, now int64) {
	q := m.queue
	delete(q.processing, m.id)
	q.setState(m, store.Pending)
	m.visibleAt = visibleAt
	m.lockedUntil = 0
	q.pushPending(m, now)
}

// byIDLocked returns the message with the id, or nil.
func (s *backend) byIDLocked(id int64) *message {
	i := id - s.firstID
	if i < 0 || i >= int64(len(s.msgs)) {
		return nil
	}
	return s.msgs[i]
}

// listLocked returns up to limit messages of q in state st with ids above
// after, by id.
func (s *backend) listLocked(q *queue, st store.State, after int64, limit int) []*message {
	return s.filterLocked(store.ListFilter{Queue: q.name, State: st, AfterID: after, Limit: limit}, q)
}

// filterLocked returns up to f.Limit messages of q that pass f, by id:
// ascending, or descending from f.BeforeID when it is set.
func (s *backend) filterLocked(f store.ListFilter, q *queue) []*message {
	pass := func(m *message) bool {
		return m != nil && m.queue == q && m.state == f.State && (f.Key == "" || m.key == f.Key) &&
			(f.Kind == "" || m.kind == f.Kind) && (f.Reason == "" || m.deadReason == f.Reason)
	}
	var out []*message
	first := max(0, f.AfterID+1-s.firstID) // the index of the smallest id listed
	if f.BeforeID <= 0 {
		for i := first; i < int64(len(s.msgs)) && len(out) < f.Limit; i++ {
			if pass(s.msgs[i]) {
				out = append(out, s.msgs[i])
			}
		}
		return out
	}
	for i := min(int64(len(s.msgs)), f.BeforeID-s.firstID) - 1; i >= first && len(out) < f.Limit; i-- {
		if pass(s.msgs[i]) {
			out = append(out, s.msgs[i])
		}
	}
	return out
}

func wall(nanos int64) time.Time {
	if nanos == 0 {
		return time.Time{}
	}
	return time.Unix(0, nanos).UTC()
}

// deadLocked returns the dead messages of the queue named by ids, or all of
// them when ids is empty. It fails on an id that is not a dead message of
// the queue, before anything changes.
func (s *backend) deadLocked(queue string, ids []int64) ([]*message, error) {
	q, ok := s.queues[queue]
	switch {
	case !ok && len(ids) > 0:
		return nil, fmt.Errorf("%w: queue %q has no dead letters", store.ErrNotFound, queue)
	case !ok:
		return nil, nil
	case len(ids) == 0:
		return s.listLocked(q, store.Dead, 0, len(s.msgs)), nil
	}
	out := make([]*message, 0, len(ids))
	for _, id := range ids {
		m := s.byIDLocked(id)
		if m == nil || m.queue != q || m.state != store.Dead {
			return nil, fmt.Errorf("%w: message %d is not a dead letter of queue %q", store.ErrNotFound, id, q.name)
		}
		out = append(out, m)
	}
	return out, nil
}

func (s *backend) Redrive(ctx context.Context, queue string, ids []int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.deadLocked(queue, ids)
	if err != nil {
		return 0, err
	}
	now := s.clk.Now().UnixNano()
	for _, m := range ms {
		m.queue.setState(m, store.Pending)
		m.deliveries = 0
		m.deadReason = ""
		m.finishedAt = 0
		m.fence = 0 // no lease from before it died completes it late
		m.visibleAt = now
		s.lineUpLocked(m, now)
	}
	return len(ms), nil
}

// movableLocked returns up to m.Limit messages that m selects, in its
// order: pending ones visible at now in claim order, dead ones by id.
func (s *backend) movableLocked(m store.Move, now int64) []*message {
	q, ok := s.queues[m.Queue]
	if !ok {
		return nil
	}
	if m.State == store.Dead {
		var out []*message
		for _, d := range s.listLocked(q, store.Dead, 0, len(s.msgs)) {
			if len(out) == m.Limit {
				break
			}
			if m.To != "" || d.dlSource != "" {
				out = append(out, d)
			}
		}
		return out
	}
	q.makeVisible(now)
	var out []*message
	for _, p := range q.ready.ms {
		if m.To != "" || p.dlSource != "" {
			out = append(out, p)
		}
	}
	// The ready heap's order is the claim order.
	slices.SortFunc(out, func(a, b *message) int {
		return cmp.Or(cmp.Compare(b.priority, a.priority), cmp.Compare(a.visibleAt, b.visibleAt), cmp.Compare(a.id, b.id))
	})
	return out[:min(len(out), m.Limit)]
}

// transferLocked moves a message to the queue named to, as
// storecore.SettleTx's Transfer says. A head it moves leaves its line
// headless; Promote lets the next one go.
func (s *backend) transferLocked(m *message, to string, a storecore.Arrival, now int64) {
	q := m.queue
	delete(q.processing, m.id)
	q.removePending(m)
	q.counts[m.state]--
	if m.dedupID != "" && q.dedup[m.dedupID] == m {
		delete(q.dedup, m.dedupID)
	}
	q.leaveLine(m)
	if a.Dead {
		m.noteError(a.Error, now)
		m.dlSource, m.deadReason, m.lastError = q.name, a.Reason, a.Error
	} else {
		m.dlSource, m.deadReason = "", ""
		m.deliveries, m.firstClaimedAt = 0, 0
	}
	m.dlq, m.maxDeliv = a.DeadLetterQueue, a.MaxDeliveries
	m.dedupID, m.finishedAt, m.lockedUntil = "", 0, 0
	m.fence = 0 // no earlier lease completes it, late or not: claims mint tokens from 1
	m.visibleAt = now
	s.arrivals++
	m.arrival = s.arrivals
	m.queue = s.queueLocked(to)
	m.state = store.Pending
	m.queue.counts[store.Pending]++
	s.lineUpLocked(m, now)
}

func (s *backend) Purge(ctx context.Context, queue string, ids []int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.deadLocked(queue, ids)
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		s.deleteLocked(m)
	}
	return len(ms), nil
}

// trimLocked drops deleted messages from the front of msgs.
func (s *backend) trimLocked() {
	n := 0
	for n < len(s.msgs) && s.msgs[n] == nil {
		n++
	}
	if n > 0 {
		s.msgs = slices.Clone(s.msgs[n:])
		s.firstID += int64(n)
	}
}

func (s *backend) deleteLocked(m *message) {
	q := m.queue
	s.msgs[m.id-s.firstID] = nil
	q.counts[m.state]--
	if m.dedupID != "" && q.dedup[m.dedupID] == m {
		delete(q.dedup, m.dedupID)
	}
	if m.uniqueKey != "" {
		if kept := removeMessage(s.unique[m.uniqueKey], m); len(kept) > 0 {
			s.unique[m.uniqueKey] = kept
		} else {
			delete(s.unique, m.uniqueKey)
		}
	}
}

func (s *backend) Stats(ctx context.Context, queue string) (store.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats(queue), nil
}

func (s *backend) AllStats(context.Context) ([]store.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.queueNames()
	out := make([]store.Stats, len(names))
	for i, q := range names {
		out[i] = s.stats(q)
	}
	return out, nil
}

// stats counts a queue's messages under s.mu.
func (s *backend) stats(queue string) store.Stats {
	st := store.Stats{Queue: queue, Paused: s.paused[queue]}
	q, ok := s.queues[queue]
	if !ok {
		return st
	}
	st.Pending = q.counts[store.Pending]
	st.Waiting = q.counts[store.Waiting]
	st.Processing = q.counts[store.Processing]
	st.Completed = q.counts[store.Completed]
	st.Dead = q.counts[store.Dead]
	st.Cancelled = q.counts[store.Cancelled]
	for _, line := range q.keys {
		if len(line.waiting) > 0 {
			st.BlockedKeys++
		}
	}
	// The oldest visible message may be of any priority: a look at each.
	now := s.clk.Now().UnixNano()
	q.makeVisible(now)
	oldest := int64(math.MaxInt64)
	for _, m := range q.ready.ms {
		oldest = min(oldest, m.visibleAt)
	}
	if oldest != math.MaxInt64 {
		st.OldestPendingAge = time.Duration(now - oldest)
	}
	// Once makeVisible has run, the delayed heap holds exactly the
	// pending messages that are not visible.
	st.Delayed = int64(len(q.delayed.ms))
	return st
}

func (s *backend) List(ctx context.Context, f store.ListFilter) ([]store.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[f.Queue]
	if !ok {
		return nil, nil
	}
	var out []store.Info
	for _, m := range s.filterLocked(f, q) {
		out = append(out, m.info())
	}
	return out, nil
}

func (s *backend) Get(ctx context.Context, id int64) (store.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.byIDLocked(id)
	if m == nil {
		return store.Info{}, storecore.NoMessage("", id)
	}
	in := m.info()
	in.Errors = slices.Clone(m.errors)
	in.Snoozes = m.snoozes
	return in, nil
}

func (s *backend) BlockedKeys(ctx context.Context, queue, afterKey string, limit int) ([]store.BlockedKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[queue]
	if !ok {
		return nil, nil
	}
	var out []store.BlockedKey
	for key, line := range q.keys {
		if len(line.waiting) > 0 && key > afterKey {
			bk := store.BlockedKey{Key: key, Waiting: int64(len(line.waiting))}
			if len(line.running) > 0 {
				bk.Head = line.running[0].info()
			}
			out = append(out, bk)
		}
	}
	slices.SortFunc(out, func(a, b store.BlockedKey) int { return cmp.Compare(a.Key, b.Key) })
	return out[:min(len(out), limit)], nil
}

// info describes the message; its payload and attributes are shared, as
// the store never changes them.
// noteError adds errText, recorded at now, to m's error history.
func (m *message) noteError(errText string, now int64) {
	if len(m.errors) == store.MaxErrors {
		m.errors = slices.Delete(m.errors, 0, 1)
	}
	m.errors = append(m.errors, store.AttemptError{Attempt: m.deliveries, At: wall(now), WorkerID: m.worker, Error: errText})
}

func (m *message) info() store.Info {
	return store.Info{
		ID: m.id, Queue: m.queue.name, Key: m.key, DedupID: m.dedupID, Kind: m.kind, Priority: m.priority, State: m.state, Payload: m.payload,
		Deliveries: m.deliveries, MaxDeliveries: m.maxDeliv, FencingToken: m.fence, WorkerID: m.worker,
		LastError: m.lastError, DeadReason: m.deadReason, EnqueuedAt: wall(m.enqueuedAt), VisibleAt: wall(m.visibleAt),
		LeaseExpires: wall(m.lockedUntil), FinishedAt: wall(m.finishedAt),
		Attributes: m.attributes, FirstClaimedAt: wall(m.firstClaimedAt),
		DeadLetterQueue: m.dlq, DeadLetterSource: m.dlSource,
	}
}

func (s *backend) Prune(ctx context.Context, p store.Prune) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now().UnixNano()
	finishedBefore := now - int64(p.OlderThan)
	enqueuedBefore := now - int64(s.opts.DedupWindow)
	old := func(m *message) bool { return m.finishedAt <= finishedBefore && m.enqueuedAt <= enqueuedBefore }
	deleted := 0
	if p.State == store.Completed {
		// In order of completion: the oldest first, and the scan stops at
		// the first one inside the retention.
		for _, q := range s.queues {
			if p.Queue != "" && q.name != p.Queue {
				continue
			}
			kept := q.completed[:0]
			for i, m := range q.completed {
				if deleted == p.Limit || m.finishedAt > finishedBefore {
					kept = append(kept, q.completed[i:]...)
					break
				}
				if !old(m) {
					kept = append(kept, m)
					continue
				}
				s.deleteLocked(m)
				deleted++
			}
			clear(q.completed[len(kept):])
			q.completed = kept
		}
	} else {
		for _, m := range s.msgs {
			if deleted == p.Limit {
				break
			}
			if m != nil && m.state == p.State && (p.Queue == "" || m.queue.name == p.Queue) && old(m) {
				s.deleteLocked(m)
				deleted++
			}
		}
	}
	s.trimLocked()
	return deleted, nil
}

// pushPending puts a pending message in line for claims: among the ready
// ones when it is visible at now, else among the delayed.
func (q *queue) pushPending(m *message, now int64) {
	if m.visibleAt <= now {
		heap.Push(&q.ready, m)
	} else {
		heap.Push(&q.delayed, m)
	}
}

// placeFair gives the visibility that places m, a message of a fairness
// group ready at now, in the claim order: a microsecond after its group's
// last ready message, or at the queue's first ready message of its
// priority when that is later, and never after now. It reads every ready
// message of the queue: only messages with fairness groups pay for it.
func (q *queue) placeFair(m *message, now int64) int64 {
	q.makeVisible(now)
	first, last := now, int64(math.MinInt64)
	for _, r := range q.ready.ms {
		if r.priority == m.priority {
			first = min(first, r.visibleAt)
		}
		if r.fairGroup == m.fairGroup {
			last = max(last, r.visibleAt+int64(time.Microsecond))
		}
	}
	return min(now, max(first, last))
}

// leaveLine takes a message out of its key's line, if it is in one, and
// forgets a line left empty.
func (q *queue) leaveLine(m *message) {
	if line := q.keys[m.key]; m.key != "" && line != nil {
		line.running = removeMessage(line.running, m)
		line.waiting = removeMessage(line.waiting, m)
		if len(line.running) == 0 && len(line.waiting) == 0 {
			delete(q.keys, m.key)
		}
	}
}

// dropCompleted takes a completed message out of the queue's completions,
// which Prune reads, when it leaves the state another way than by Prune.
func (q *queue) dropCompleted(m *message) {
	if m.state == store.Completed {
		q.completed = slices.DeleteFunc(q.completed, func(c *message) bool { return c == m })
	}
}

// removePending takes a message out of line, if it is in.
func (q *queue) removePending(m *message) {
	switch {
	case m.heapIndex < 0:
	case m.inReady:
		heap.Remove(&q.ready, m.heapIndex)
	default:
		heap.Remove(&q.delayed, m.heapIndex)
	}
}

// makeVisible moves the messages visible at now from delayed to ready.
func (q *queue) makeVisible(now int64) {
	for len(q.delayed.ms) > 0 && q.delayed.ms[0].visibleAt <= now {
		heap.Push(&q.ready, heap.Pop(&q.delayed))
	}
}

// pendingHeap orders pending messages: by priority (highest first) when
// it holds the ready ones, then by visibility, then by id.
type pendingHeap struct {
	ms    []*message
	ready bool
}

func (h *pendingHeap) Len() int { return len(h.ms) }
func (h *pendingHeap) Less(i, j int) bool {
	a, b := h.ms[i], h.ms[j]
	if h.ready && a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.visibleAt != b.visibleAt {
		return a.visibleAt < b.visibleAt
	}
	return a.id < b.id
}
func (h *pendingHeap) Swap(i, j int) {
	h.ms[i], h.ms[j] = h.ms[j], h.ms[i]
	h.ms[i].heapIndex = i
	h.ms[j].heapIndex = j
}
func (h *pendingHeap) Push(x any) {
	m := x.(*message)
	m.heapIndex, m.inReady = len(h.ms), h.ready
	h.ms = append(h.ms, m)
}
func (h *pendingHeap) Pop() any {
	m := h.ms[len(h.ms)-1]
	h.ms[len(h.ms)-1] = nil
	m.heapIndex = -1
	h.ms = h.ms[:len(h.ms)-1]
	return m
}
