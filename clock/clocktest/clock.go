// Package clocktest provides a fake [clock.Clock] for tests.
//
// The fake's time moves only when the test says so. [Clock.Advance] moves
// wall and monotonic time together and fires due timers, tickers and
// AfterFunc callbacks in time order; [Clock.SetWall] jumps the wall clock
// alone, as NTP does; [Clock.Sleep] advances the time instead of blocking.
// [Clock.BlockUntil] lets a test wait until goroutines under test have set
// their timers before it advances, so the two never race.
//
// Use it for code a test drives from one goroutine. For background loops,
// testing/synctest with the system clock is often simpler: see package clock.
package clocktest

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// DefaultStart is the wall time a new Clock starts at.
var DefaultStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a fake clock. The zero value is not usable; call New. All
// methods are safe for concurrent use.
//
// AfterFunc callbacks that come due during Advance run on the goroutine that
// called Advance, one after the other in time order, with no lock held; a
// callback may use the clock. A callback whose timer is made or reset with a
// non-positive duration runs at once in its own goroutine, as with the time
// package.
type Clock struct {
	mu      sync.Mutex
	wall    time.Time
	mono    time.Duration
	seq     uint64
	pending timerHeap
	changed chan struct{} // closed and replaced whenever pending changes
}

var _ clock.Clock = (*Clock)(nil)

// New returns a fake clock at DefaultStart with monotonic time zero.
func New() *Clock {
	return &Clock{wall: DefaultStart, changed: make(chan struct{})}
}

// Now returns the fake wall time, in UTC.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}

// Monotonic returns the fake monotonic time.
func (c *Clock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// SetWall sets the wall time and leaves monotonic time and timers alone, as
// an NTP step does. It rejects a time whose location is not UTC.
func (c *Clock) SetWall(t time.Time) error {
	if t.Location() != time.UTC {
		return fmt.Errorf("clocktest: wall time %s is in location %q, want UTC", t, t.Location())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = t.Round(0)
	return nil
}

// Advance moves wall and monotonic time forward by d, firing every timer,
// ticker and AfterFunc callback that comes due, in time order; each fires
// with the clock set to its own due time. It panics if d is negative: time
// does not go back.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("clocktest: Advance(%s): negative duration", d))
	}
	c.advance(d, nil)
}

// Sleep advances the clock by d instead of blocking, and returns nil. If ctx
// has ended it returns ctx.Err() without advancing; if ctx ends while the
// clock advances (a timer that fired cancelled it), the clock stops at that
// moment and Sleep returns ctx.Err().
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.advance(d, func() bool { return ctx.Err() != nil })
	}
	return ctx.Err()
}

// advance moves the clock to now+d, firing due timers in order. After each
// firing it asks stop whether to halt there.
func (c *Clock) advance(d time.Duration, stop func() bool) {
	c.mu.Lock()
	target := c.mono + d
	for len(c.pending) > 0 && c.pending[0].deadline <= target {
		t := c.pending[0]
		c.setMonoLocked(t.deadline)
		if t.period > 0 {
			t.deadline += t.period
			heap.Fix(&c.pending, 0)
		} else {
			heap.Pop(&c.pending)
			c.notifyLocked()
		}
		if t.f != nil {
			c.mu.Unlock()
			t.f()
			c.mu.Lock()
		} else {
			t.deliverLocked(c.wall)
		}
		if stop != nil && stop() {
			c.mu.Unlock()
			return
		}
	}
	c.setMonoLocked(target)
	c.mu.Unlock()
}

// setMonoLocked moves monotonic time to m, and wall time with it. A
// concurrent Advance may already have gone further; time never goes back.
func (c *Clock) setMonoLocked(m time.Duration) {
	if m <= c.mono {
		return
	}
	c.wall = c.wall.Add(m - c.mono)
	c.mono = m
}

// Waiters returns the number of timers, tickers and AfterFunc callbacks that
// are set and have not fired or been stopped. A ticker counts until it is
// stopped.
func (c *Clock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// BlockUntil waits until at least n timers, tickers or AfterFunc callbacks
// are set on the clock (see Waiters), or ctx ends. A test calls it before
// Advance so that the goroutines under test have reached their waits.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		count, changed := len(c.pending), c.changed
		c.mu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("clocktest: %d of %d waiters: %w", count, n, ctx.Err())
		}
	}
}

func (c *Clock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// NewTimer implements clock.Timers.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1), index: -1}
	t.Reset(d)
	return t
}

// AfterFunc implements clock.Timers.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if f == nil {
		panic("clocktest: AfterFunc with nil func")
	}
	t := &timer{c: c, f: f, index: -1}
	t.Reset(d)
	return t
}

// NewTicker implements clock.Timers.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	t := &timer{c: c, ch: make(chan time.Time, 1), index: -1}
	(*ticker)(t).Reset(d)
	return (*ticker)(t)
}

var errNonPositiveTicker = errors.New("clocktest: non-positive interval for NewTicker or Reset")

// timer is a fake timer, ticker (period > 0) or AfterFunc (f != nil).
type timer struct {
	c        *Clock
	ch       chan time.Time
	f        func()
	period   time.Duration
	deadline time.Duration
	seq      uint64
	index    int // position in c.pending, -1 when not pending
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.stopLocked()
}

// stopLocked unschedules t and drops an undelivered value, so nothing stale
// is received afterwards. A value sent but not yet received counts as not
// yet fired, as with the time package's synchronous channels.
func (t *timer) stopLocked() bool {
	active := false
	if t.index >= 0 {
		heap.Remove(&t.c.pending, t.index)
		t.c.notifyLocked()
		active = true
	}
	if t.ch != nil {
		select {
		case <-t.ch:
			active = true
		default:
		}
	}
	return active
}

func (t *timer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	active := t.stopLocked()
	if d <= 0 {
		if t.f != nil {
			c.mu.Unlock()
			go t.f()
			return active
		}
		t.deliverLocked(c.wall)
		c.mu.Unlock()
		return active
	}
	t.scheduleLocked(d)
	c.mu.Unlock()
	return active
}

func (t *timer) scheduleLocked(d time.Duration) {
	c := t.c
	c.seq++
	t.seq = c.seq
	t.deadline = c.mono + d
	heap.Push(&c.pending, t)
	c.notifyLocked()
}

// deliverLocked sends now on the channel unless a value is already waiting
// there: like a real ticker, a slow receiver misses ticks.
func (t *timer) deliverLocked(now time.Time) {
	select {
	case t.ch <- now:
	default:
	}
}

type ticker timer

func (t *ticker) C() <-chan time.Time { return t.ch }

func (t *ticker) Stop() { (*timer)(t).Stop() }

func (t *ticker) Reset(d time.Duration) {
	if d <= 0 {
		panic(errNonPositiveTicker)
	}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	(*timer)(t).stopLocked()
	t.period = d
	(*timer)(t).scheduleLocked(d)
}

// timerHeap orders pending timers by deadline, then by creation, so timers
// due at the same moment fire in the order they were set.
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
