package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/backoff"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/store"
)

// loop is one queue's part of a Run: its claim loop and the handler
// goroutines it feeds. Its fields are owned by the goroutine that runs it.
type loop struct {
	r *run
	w *Worker
	q *queue
	// done takes finished jobs; buffered for every slot so that jobs never
	// block.
	done chan *job
	// work hands jobs to idle handler goroutines. Goroutines are kept
	// rather than started per message: a fresh goroutine's stack grows on
	// every message, which costs more than the handoff.
	work chan *job
	idle int // goroutines waiting on work, by the claim loop's count
	jobs map[*job]struct{}
	free int
	// timer times pauses; nil until the first.
	timer clock.Timer
}

// loopResult is how one queue's loop ended.
type loopResult struct {
	err       error
	abandoned int  // handlers left running after a hard stop
	hard      bool // the drain was cut short
}

func newLoop(r *run, q *queue) *loop {
	return &loop{r: r, w: r.w, q: q, done: make(chan *job, q.concurrency), work: make(chan *job),
		jobs: make(map[*job]struct{}), free: q.concurrency}
}

// run claims until claims ends, calls claimsOver, then drains the queue's
// running handlers, hard-stopping them if the drain is cut short.
func (l *loop) run(ctx, claims, receives context.Context, claimsOver func()) loopResult {
	defer close(l.work)
	res := loopResult{err: l.claim(claims, receives)}
	claimsOver()
	l.q.log.Info("worker stopping", "in_flight", len(l.jobs))
	if !l.drain(ctx) {
		res.hard = true
		for j := range l.jobs {
			j.cancel(ErrShutdown)
		}
		res.abandoned = l.settle()
	}
	return res
}

func (l *loop) finished(j *job) {
	delete(l.jobs, j)
	l.free++
	l.idle++
}

// reapDone takes every finished job without blocking.
func (l *loop) reapDone() {
	for {
		select {
		case j := <-l.done:
			l.finished(j)
		default:
			return
		}
	}
}

// pause waits d, or until a job finishes or claims ends. It reports
// whether claims is still open. One timer serves every pause of the loop:
// with its slots full the loop pauses once per job.
func (l *loop) pause(claims context.Context, d time.Duration) bool {
	if l.timer == nil {
		l.timer = l.w.cfg.Clock.NewTimer(d)
	} else {
		l.timer.Reset(d)
	}
	defer l.timer.Stop()
	select {
	case j := <-l.done:
		l.finished(j)
	case <-l.timer.C():
	case <-claims.Done():
		return false
	}
	return true
}

// claim is the claim loop: it receives into free slots and starts a handler
// for each message, until claims ends or MaxIterations is reached.
func (l *loop) claim(claims, receives context.Context) error {
	w := l.w
	iterations, failures := 0, 0
	for w.cfg.MaxIterations == 0 || iterations < w.cfg.MaxIterations {
		l.q.hb.Beat()
		l.reapDone()
		if claims.Err() != nil || w.draining.Load() {
			return nil
		}
		if l.free == 0 {
			if !l.pause(claims, w.cfg.PollInterval) {
				return nil
			}
			continue
		}
		if w.paused() || w.cfg.Saturated != nil && w.cfg.Saturated(claims) {
			if !l.pause(claims, w.cfg.PollInterval) {
				return nil
			}
			continue
		}
		msgs, err := l.q.mb.Receive(receives, mailbox.ReceiveOptions{Max: l.free, Visibility: w.cfg.LeaseDuration, Wait: w.cfg.LongPoll})
		iterations++
		if err != nil {
			if receives.Err() != nil {
				iterations-- // not a receive that ran its course
				continue     // stopping or draining: the loop's top decides
			}
			if errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrInvalid) {
				return fmt.Errorf("worker: receive: %w", err)
			}
			failures++
			delay := receiveBackoff.Delay(failures)
			l.q.log.Error("receive failed; backing off", "error", err, "failures", failures, "retry_in", delay)
			if !l.pause(claims, delay) {
				return nil
			}
			continue
		}
		failures = 0
		for _, msg := range msgs {
			// Drain closes pause before receives is cancelled, so a Drain
			// that raced with this receive is seen here.
			if receives.Err() != nil || w.paused() || w.draining.Load() {
				l.unreceive(msg)
				continue
			}
			l.start(msg)
		}
	}
	// Messages claimed by a receive that raced with the stop are in msgs
	// and were released above.
	return nil
}

// receiveBackoff spaces out receives while the store fails. Its cap keeps
// the loop's heartbeat well inside the watchdog's default threshold.
var receiveBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Max: 30 * time.Second}

// drain waits for running handlers. It reports false when the wait was cut
// short by a hard stop (ctx ended, Shutdown's patience ran out).
func (l *loop) drain(ctx context.Context) bool {
	for len(l.jobs) > 0 {
		select {
		case j := <-l.done:
			l.finished(j)
		case <-ctx.Done():
			return false
		case <-l.w.hard:
			return false
		}
	}
	return true
}

// settle waits HardStopWait for cancelled handlers, then releases the
// leases of those still running and returns how many there were.
func (l *loop) settle() int {
	w := l.w
	if len(l.jobs) > 0 {
		t := w.cfg.Clock.NewTimer(w.cfg.HardStopWait)
	wait:
		for len(l.jobs) > 0 {
			select {
			case j := <-l.done:
				l.finished(j)
			case <-t.C():
				break wait
			}
		}
		t.Stop()
	}
	abandoned := 0
	finishing := 0
	for j := range l.jobs {
		if !j.state.CompareAndSwap(jobRunning, jobReleased) {
			finishing++ // settling its message itself; wait for it below
			continue
		}
		abandoned++
		w.keeper.drop(j.hold)
		ctx, cancel := w.hardStopContext()
		err := w.cfg.Store.Release(ctx, store.Release{Lease: j.msg.Lease})
		cancel()
		l.q.log.Warn("handler did not return after cancellation; lease released", "message_id", j.msg.MessageID, "error", err)
	}
	// Jobs settling their own message get HardStopWait more; then their
	// store calls are cancelled. Run does not return while they talk to the
	// store.
	if finishing > 0 {
		t := w.cfg.Clock.AfterFunc(w.cfg.HardStopWait, l.r.cancelOps)
		// An abandoned handler that returns now reports done too: only
		// jobs that were settling count.
		for finishing > 0 {
			j := <-l.done
			if j.state.Load() == jobFinishing {
				finishing--
			}
			l.finished(j)
		}
		t.Stop()
	}
	return abandoned
}

func (l *loop) unreceive(msg *mailbox.Message) {
	ctx, cancel := l.w.hardStopContext()
	defer cancel()
	if err := msg.Unreceive(ctx); err != nil {
		l.q.log.Warn("could not release a message received during shutdown; it returns when its lease expires", "message_id", msg.MessageID, "error", err)
	}
}

// start runs a handler for msg on a kept goroutine, or a new one.
func (l *loop) start(msg *mailbox.Message) {
	w := l.w
	ctx, cancel := context.WithCancelCause(l.r.base)
	j := &job{l: l, msg: msg, ctx: ctx, cancel: cancel}
	j.hold = w.keeper.hold(msg.Lease, l.q.keeperName, msg.LeaseDeadline(), cancel)
	l.jobs[j] = struct{}{}
	l.free--
	w.m.claimed.Add(ctx, 1, l.q.attrs.of(msg.Kind).add...)
	if l.idle > 0 {
		// A goroutine that reported done is at, or on its way to, the
		// receive.
		l.idle--
		l.work <- j
		return
	}
	go l.handle(j)
}

// handle runs j, then every job handed to it, until work is closed.
func (l *loop) handle(j *job) {
	for {
		if l.w.process(j) {
			l.r.complete <- j // the completer reports it done
		} else {
			l.done <- j
		}
		var ok bool
		if j, ok = <-l.work; !ok {
			return
		}
	}
}
