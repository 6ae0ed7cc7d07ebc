package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// keeper keeps the leases of running handlers alive: one goroutine and one
// store call per tick for all of them. Each held lease has a deadline, its
// expiry by the keeper's own reckoning (the monotonic time its last
// successful claim or extension was sent, plus the lease it asked for), and
// one timer, armed at or before the earliest deadline, finds the leases
// whose deadline passed; so a lease counts as lost when the store says so or
// when that expiry passes without a renewal: transient store errors are
// ridden out while the lease is still valid.
type keeper struct {
	st  store.Store
	clk clock.Clock
	// every is the time between rounds; each asks for lease again.
	every, lease time.Duration
	log          *slog.Logger
	m            *workerMetrics
	// cancelled is the store's cancellation wakeup, taken when the keeper
	// is made, before any lease it keeps is claimed, so that run misses
	// no cancellation however late its goroutine starts.
	cancelled <-chan struct{}

	mu    sync.Mutex
	held  map[store.Lease]*hold
	batch []store.Lease // used by tick only
	// timer calls expire at the monotonic time at, when armed. While
	// armed, at is no later than the deadline of any held lease.
	timer clock.Timer
	at    time.Duration
	armed bool
}

// hold is one lease the keeper keeps.
type hold struct {
	lease  store.Lease
	queue  string // for the logs, when the keeper's logger does not name it
	cancel context.CancelCauseFunc
	// lost, dropped, deadline, limit and limited are guarded by keeper.mu.
	// deadline is when the lease ends, on the monotonic clock, by the
	// worker's own reckoning. limit, when limited, is when the handler's
	// maximum processing time ends: then cancel is called with
	// ErrMaxProcessingTime.
	lost, dropped, limited bool
	deadline, limit        time.Duration
}

func newKeeper(st store.Store, clk clock.Clock, every, lease time.Duration, log *slog.Logger, m *workerMetrics) *keeper {
	return &keeper{st: st, clk: clk, every: every, lease: lease, log: log, m: m, held: make(map[store.Lease]*hold),
		cancelled: st.CancelWakeup()}
}

// hold starts keeping l, which ends at the monotonic time deadline unless
// extended. cancel is called once, from another goroutine, if the lease
// is lost before drop: with ErrCancelled when its message was cancelled,
// store.ErrLeaseLost otherwise.
func (k *keeper) hold(l store.Lease, queue string, deadline time.Duration, cancel context.CancelCauseFunc) *hold {
	h := &hold{lease: l, queue: queue, cancel: cancel, deadline: deadline}
	k.mu.Lock()
	k.held[l] = h
	if !k.armed || deadline < k.at {
		k.armLocked(deadline)
	}
	k.mu.Unlock()
	return h
}

// limit has h's cancel called with ErrMaxProcessingTime at the monotonic
// time at, unless h is dropped or lost first.
func (k *keeper) limit(h *hold, at time.Duration) {
	k.mu.Lock()
	if !h.lost && !h.dropped {
		h.limit, h.limited = at, true
		if !k.armed || at < k.at {
			k.armLocked(at)
		}
	}
	k.mu.Unlock()
}

// armLocked sets the expiry timer to go off at the monotonic time at.
func (k *keeper) armLocked(at time.Duration) {
	k.at, k.armed = at, true
	d := at - k.clk.Monotonic()
	if k.timer == nil {
		k.timer = k.clk.AfterFunc(d, k.expire)
		return
	}
	k.timer.Reset(d)
}

// disarmLocked stops the expiry timer when no lease is held.
func (k *keeper) disarmLocked() {
	if len(k.held) == 0 && k.armed {
		k.armed = false
		k.timer.Stop()
	}
}

// expire loses every held lease whose deadline has passed, cancels the
// handlers past their processing limit, and arms the timer for the
// earliest deadline or limit left.
func (k *keeper) expire() {
	now := k.clk.Monotonic()
	var expired, overtime []*hold
	k.mu.Lock()
	var next time.Duration
	have := false
	for _, h := range k.held {
		if h.deadline <= now {
			expired = append(expired, h)
			continue
		}
		if !have || h.deadline < next {
			next, have = h.deadline, true
		}
		if !h.limited {
			continue
		}
		if h.limit <= now {
			h.limited = false
			overtime = append(overtime, h)
		} else if h.limit < next {
			next = h.limit
		}
	}
	if have {
		k.armLocked(next)
	} else {
		k.armed = false
	}
	k.mu.Unlock()
	for _, h := range overtime {
		h.cancel(ErrMaxProcessingTime)
	}
	for _, h := range expired {
		k.lose(h, "expired before an extension succeeded", store.ErrLeaseLost)
	}
}

// drop stops keeping h's lease and reports whether it was lost, and when,
// on the monotonic clock, the lease ends by the worker's reckoning.
func (k *keeper) drop(h *hold) (lost bool, deadline time.Duration) {
	k.mu.Lock()
	h.dropped = true
	lost, deadline = h.lost, h.deadline
	if !lost {
		delete(k.held, h.lease)
		k.disarmLocked()
	}
	k.mu.Unlock()
	return lost, deadline
}

// lose marks h's lease lost and cancels its handler with cause.
func (k *keeper) lose(h *hold, why string, cause error) {
	k.mu.Lock()
	if h.lost || h.dropped {
		k.mu.Unlock()
		return
	}
	h.lost = true
	delete(k.held, h.lease)
	k.disarmLocked()
	k.mu.Unlock()
	k.m.extensions.Add(context.Background(), 1, k.m.extLost)
	log := k.log
	if h.queue != "" {
		log = log.With("queue", h.queue)
	}
	if cause == ErrCancelled {
		log.Info("message cancelled; stopping its handler", "message_id", h.lease.MessageID, "fencing_token", h.lease.FencingToken)
	} else {
		log.Warn("lease lost", "message_id", h.lease.MessageID, "fencing_token", h.lease.FencingToken, "why", why)
	}
	h.cancel(cause)
}

// run extends every held lease each round until ctx ends, and at once
// when the store tells of a cancellation, so that a cancelled message's
// handler stops within a round trip rather than at the next round.
func (k *keeper) run(ctx context.Context) {
	t := k.clk.NewTicker(k.every)
	defer t.Stop()
	cancelled := k.cancelled
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-cancelled:
			cancelled = k.st.CancelWakeup()
		}
		k.tick(ctx)
	}
}

// tick extends every held lease with one store call.
func (k *keeper) tick(ctx context.Context) {
	k.mu.Lock()
	k.batch = k.batch[:0]
	for l := range k.held {
		k.batch = append(k.batch, l)
	}
	k.mu.Unlock()
	if len(k.batch) == 0 {
		return
	}
	sent := k.clk.Monotonic()
	res, err := k.st.Extend(ctx, k.batch, k.lease)
	if err != nil {
		k.m.extensions.Add(ctx, int64(len(k.batch)), k.m.extError)
		if ctx.Err() == nil {
			k.log.Warn("lease extension failed; retrying next tick while the leases last", "leases", len(k.batch), "error", err)
		}
		return
	}
	var lost, cancelled map[store.Lease]bool
	if len(res.Lost) > 0 {
		lost = make(map[store.Lease]bool, len(res.Lost))
		for _, l := range res.Lost {
			lost[l] = true
		}
		cancelled = make(map[store.Lease]bool, len(res.Cancelled))
		for _, l := range res.Cancelled {
			cancelled[l] = true
		}
	}
	left := sent + k.lease - k.clk.Monotonic()
	var refused, late []*hold
	k.mu.Lock()
	for _, l := range k.batch {
		h := k.held[l]
		switch {
		case h == nil: // dropped or lost while the call ran
		case lost[l]:
			refused = append(refused, h)
		case left <= 0:
			late = append(late, h)
		default:
			// A round asks for the lease a claim does, from later on: a
			// deadline only moves later, so the timer, armed at or before
			// the earliest deadline, stays so.
			h.deadline = sent + k.lease
		}
	}
	k.mu.Unlock()
	k.m.extensions.Add(ctx, int64(len(k.batch)-len(res.Lost)), k.m.extOK)
	for _, h := range refused {
		if cancelled[h.lease] {
			k.lose(h, "", ErrCancelled)
		} else {
			k.lose(h, "the store refused the extension", store.ErrLeaseLost)
		}
	}
	for _, h := range late {
		k.lose(h, "the extension took longer than the lease it asked for", store.ErrLeaseLost)
	}
}
