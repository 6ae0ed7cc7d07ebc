package worker

import (
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// Heartbeat records when a loop last made progress, on a monotonic clock.
// It is safe for concurrent use.
type Heartbeat struct {
	clk  clock.MonotonicClock
	last atomic.Int64
}

// NewHeartbeat returns a heartbeat that beat just now. A nil clk is the
// system clock.
func NewHeartbeat(clk clock.MonotonicClock) *Heartbeat {
	if clk == nil {
		clk = clock.System()
	}
	h := &Heartbeat{clk: clk}
	h.Beat()
	return h
}

// Beat records progress now.
func (h *Heartbeat) Beat() { h.last.Store(int64(h.clk.Monotonic())) }

// Elapsed returns the time since the last beat.
func (h *Heartbeat) Elapsed() time.Duration {
	return h.clk.Monotonic() - time.Duration(h.last.Load())
}
