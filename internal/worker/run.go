package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/store"
)

// run is the state one Run shares among its queues' loops.
type run struct {
	w    *Worker
	base context.Context // of handlers
	// claims and receives are the claim loops' view of the phase, as the
	// contexts of their calls that take one: claims (for Saturated) ends
	// when the worker drains, receives (for a receive) also when it
	// pauses. Both are children of Run's ctx, so that its end reaches them
	// at once.
	claims, receives         context.Context
	stopClaims, stopReceives context.CancelFunc
	// ops is the context of the store calls that settle messages; a hard
	// stop cancels it when they outlast HardStopWait.
	ops       context.Context
	cancelOps context.CancelFunc
	// complete takes jobs whose handler succeeded to the completer, which
	// completes whatever has queued up in one store call and then reports
	// each job done to its pool. Buffered for every slot of every queue.
	complete      chan *job
	completerDone sync.WaitGroup
}

// newRun starts the completer of a Run with ctx, whose handlers' context
// is base.
func newRun(w *Worker, ctx, base context.Context) *run {
	r := &run{w: w, base: base, complete: make(chan *job, w.cfg.concurrency)}
	r.claims, r.stopClaims = w.phase.until(ctx, draining)
	r.receives, r.stopReceives = w.phase.until(ctx, paused)
	r.ops, r.cancelOps = context.WithCancel(base)
	r.completerDone.Go(r.completer)
	return r
}

// claiming reports whether the claim loops go on: the worker is not
// draining or stopping, and Run's ctx has not ended.
func (r *run) claiming() bool { return r.claims.Err() == nil }

// receiving reports whether the claim loops may receive and start
// messages: claiming, and the worker is not paused either.
func (r *run) receiving() bool { return r.receives.Err() == nil }

// close stops the completer, once every loop has ended, and then the
// contexts.
func (r *run) close() {
	close(r.complete)
	r.completerDone.Wait()
	r.cancelOps()
	r.stopReceives()
	r.stopClaims()
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
	msg  *mailbox.Message
	// handled and completion are set when the job is handed to the
	// completer.
	handled    *Message
	completion store.Completion
	hold       *hold
	// until is when the lease ends, on the monotonic clock, by the
	// worker's reckoning once the handler returned.
	until  time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	state  atomic.Int32
}
