package clock

import (
	"context"
	"time"
)

// WallClock tells the wall-clock time: timestamps, deadlines, when something
// happened. Wall time can jump (NTP, an operator), so never measure an
// interval with it: use a MonotonicClock.
type WallClock interface {
	// Now returns the current time in UTC, without a monotonic reading.
	Now() time.Time
}

// MonotonicClock measures elapsed time for intervals, timeouts and rate
// limits.
type MonotonicClock interface {
	// Monotonic returns the time elapsed since an arbitrary origin that is
	// fixed for the life of the clock. It never decreases. Only differences
	// between two readings of the same clock mean anything.
	Monotonic() time.Duration
}

// Sleeper waits.
type Sleeper interface {
	// Sleep waits for d, or until ctx ends, whichever comes first. It returns
	// nil after the full wait and ctx.Err() when ctx ended first. A
	// non-positive d returns at once (with ctx.Err() if ctx has ended).
	Sleep(ctx context.Context, d time.Duration) error
}

// Timers makes timers and tickers that run on the clock's time. They behave
// as the time package's do since Go 1.23: after Stop or Reset returns, no
// stale value is received from the channel.
type Timers interface {
	// NewTimer returns a timer that sends the time on its channel once, after
	// d. A non-positive d makes it due at once.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time on its channel every d,
	// dropping ticks for a slow receiver. It panics if d <= 0, as
	// time.NewTicker does.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f in its own goroutine after d. The returned timer's
	// channel is nil; Stop prevents a call that has not started.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the clock's form of *time.Timer.
type Timer interface {
	// C returns the channel on which the time is delivered; nil for a timer
	// made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped a
	// timer that had not yet delivered its value.
	Stop() bool
	// Reset changes the timer to fire after d, and reports what Stop would
	// have reported.
	Reset(d time.Duration) bool
}

// Ticker is the clock's form of *time.Ticker.
type Ticker interface {
	// C returns the channel on which the ticks are delivered.
	C() <-chan time.Time
	// Stop turns the ticker off; no tick is received after it returns.
	Stop()
	// Reset stops the ticker and restarts it with period d. It panics if
	// d <= 0.
	Reset(d time.Duration)
}

// Clock is everything a time-dependent component may need. Components that
// need less should accept the narrower interface.
type Clock interface {
	WallClock
	MonotonicClock
	Sleeper
	Timers
}

// System returns the clock of the operating system. Inside a testing/synctest
// bubble it runs on the bubble's fake time, like the time package.
func System() Clock { return systemClock{} }

// OrSystem returns c, or the system clock when c is nil. Configurations call
// it so that a nil clock means the system clock.
func OrSystem(c Clock) Clock {
	if c == nil {
		return System()
	}
	return c
}

// WithTimeout returns a context that ends after d on clk's time, or when
// parent ends: context.WithTimeout on an injectable clock. Its cause is
// context.DeadlineExceeded. A nil clk is the system clock.
func WithTimeout(parent context.Context, clk Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := OrSystem(clk).AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
