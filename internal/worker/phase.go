package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/runstate"
)

// phase is where a worker is in its life. A worker only moves forward
// through the phases, and may skip some:
//
//   - running: Run claims messages and runs handlers on them.
//   - draining: the worker is stopping. Its claim loops end, messages
//     received but not started are released, and running handlers finish
//     while their leases are kept, for ShutdownTimeout at most.
//   - hardStop: the drain is cut short. Running handlers' contexts are
//     cancelled with cause ErrShutdown, and after HardStopWait the leases of
//     those that have not returned are released.
//   - done: Run has returned, or the worker was stopped before Run began and
//     Run will not run.
type phase int32

const (
	running phase = iota
	draining
	hardStop
	done
)

// phases holds a worker's phase. Each phase has one signal, a channel
// closed when the worker reaches the phase; moving past phases reaches, and
// signals, each of them in turn, so a closed signal means "at this phase or
// past it".
//
// What moves a worker:
//   - to draining: Shutdown, or the end of any claim loop (the store
//     closed);
//   - to hardStop: Stop, the end of Run's ctx or of Shutdown's, or a drain
//     that has lasted ShutdownTimeout;
//   - to done: Run returning, or Shutdown or Stop before Run began.
type phases struct {
	now     atomic.Int32
	signals [done + 1]chan struct{} // by phase; running's is nil
	inRun   atomic.Bool             // Run is between begin and end

	clk        clock.Clock
	drainLimit time.Duration // ShutdownTimeout

	mu    sync.Mutex
	began bool // Run began
	// limit ends a drain that lasts too long; stopCtx stops the hard stop
	// that the end of Run's ctx would bring. Both are set during Run.
	limit   clock.Timer
	stopCtx func() bool
	// handlersStopped says whether a hard stop had to stop handlers. It is
	// written before done is reached, and read after.
	handlersStopped bool
}

// init readies p for a worker on clk whose drains last drainLimit at most.
func (p *phases) init(clk clock.Clock, drainLimit time.Duration) {
	p.clk, p.drainLimit = clk, drainLimit
	for at := draining; at <= done; at++ {
		p.signals[at] = make(chan struct{})
	}
}

// current returns the phase the worker is at.
func (p *phases) current() phase { return phase(p.now.Load()) }

// reached returns the signal of phase at: a channel closed once the worker
// has reached it or moved past it.
func (p *phases) reached(at phase) <-chan struct{} { return p.signals[at] }

// advance moves the worker to phase to, unless it is there already or past
// it. A worker stopped before Run began is done at once. Reaching draining
// during Run gives the drain ShutdownTimeout: then comes the hard stop.
func (p *phases) advance(to phase) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if to >= draining && !p.began {
		to = done
	}
	for at := p.current() + 1; at <= to; at++ {
		// The phase is stored before anything signals it: whoever sees a
		// signal sees the phase too.
		p.now.Store(int32(at))
		close(p.signals[at])
	}
	// Run's end stops the limit; a drain reached after it needs none.
	if p.current() == draining && p.limit == nil && p.inRun.Load() {
		p.limit = p.clk.AfterFunc(p.drainLimit, func() { p.advance(hardStop) })
	}
}

// begin starts Run; the end of ctx is then a hard stop. It returns (true,
// nil) when Run should go on, and must then call end; (false, nil) when the
// worker was stopped first, so that there is nothing to run; and (false,
// runstate.ErrAlreadyRun) on a second Run.
func (p *phases) begin(ctx context.Context) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.began {
		return false, runstate.ErrAlreadyRun
	}
	if p.current() == done {
		return false, nil
	}
	p.began = true
	p.inRun.Store(true)
	p.stopCtx = context.AfterFunc(ctx, func() { p.advance(hardStop) })
	return true, nil
}

// end marks Run's return; handlersStopped says whether a hard stop had to
// stop handlers.
func (p *phases) end(handlersStopped bool) {
	p.mu.Lock()
	p.stopCtx()
	if p.limit != nil {
		p.limit.Stop()
	}
	p.handlersStopped = handlersStopped
	p.inRun.Store(false)
	p.mu.Unlock()
	p.advance(done)
}
