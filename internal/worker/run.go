package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/store"
)

// run is the state one Run shares among its queues' loops.
type run struct {
	w *Worker
	// ctx is Run's: its end cuts a claim short. base is of handlers.
	ctx, base context.Context
	// draining is closed when the worker stops claiming.
	draining <-chan struct{}
	// claims is the context of the claim loops' receives: Run's, and cut
	// at the hard stop, so that a claim stuck on the database cannot hold
	// the stop up. A drain only ends their waits (draining), never a
	// claim under way.
	claims     context.Context
	stopClaims context.CancelFunc
	// ops is the context of the store calls that settle messages; a hard
	// stop cancels it when they outlast HardStopWait.
	ops       context.Context
	cancelOps context.CancelFunc
	// complete takes jobs whose handler succeeded to the completer, which
	// completes whatever has queued up in one store call and then reports
	// each job done to its pool. Buffered for as many jobs as the worker
	// has slots: a handler that finds it full waits, its slot held, which
	// bounds the completions waiting.
	complete chan *job
	// own counts the run's own goroutines: the completer, and the one
	// that cuts claims at the hard stop.
	own sync.WaitGroup
}

// newRun starts the completer of a Run with ctx, whose handlers' context
// is base.
func newRun(w *Worker, ctx, base context.Context) *run {
	r := &run{w: w, ctx: ctx, base: base, draining: w.phase.reached(draining), complete: make(chan *job, w.concurrency)}
	r.ops, r.cancelOps = context.WithCancel(base)
	r.claims, r.stopClaims = context.WithCancel(ctx)
	stop := w.phase.reached(hardStop)
	r.own.Go(func() {
		select {
		case <-stop:
			r.stopClaims()
		case <-r.claims.Done():
		}
	})
	r.own.Go(r.completer)
	return r
}

// claiming reports whether the claim loops go on: the worker is not
// draining or stopping. The end of Run's ctx is a hard stop, which moves
// the worker past draining.
func (r *run) claiming() bool { return r.w.phase.current() < draining }

// close stops the completer, once every loop has ended, and then the
// settling store calls' context.
func (r *run) close() {
	r.stopClaims()
	close(r.complete)
	r.own.Wait()
	r.cancelOps()
}

// job states: a running job's outcome is settled once, either by the job
// (finishing) or by a hard stop (released).
const (
	jobRunning int32 = iota
	jobFinishing
	jobReleased
)

// job is one message from its claim to its settling.
type job struct {
	pool *pool
	// delivery is the job's own copy of its message's delivery, which
	// the handler's Message points to: a job holds nothing of the other
	// messages its claim brought, whose deliveries the mailbox keeps in
	// one array, so that a long handler does not keep their payloads.
	delivery store.Delivery
	// handled and completion are set when the job is handed to the
	// completer.
	handled    *Message
	completion store.Completion
	// message is what the handler is given.
	message Message
	hold    *hold
	// until is when the lease ends, on the monotonic clock, by the
	// worker's reckoning once the handler returned.
	until  time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	state  atomic.Int32
	// rest are the later messages of the job's run, which wait for it,
	// in order; owned by the claim loop. runs says, from the job's start
	// on, whether it had any.
	rest []*job
	runs bool
	// after is what the job's settling left rest (restKept, restGone or
	// restUnsure); written before the job is reported done.
	after int32
}
