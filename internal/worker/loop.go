package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/store"
)

// loop is one queue's part of a Run: its claim loop and the pool of
// handlers it feeds. Its fields are owned by the goroutine that runs it.
type loop struct {
	r    *run
	w    *Worker
	q    *queue
	pool pool
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
	return &loop{r: r, w: r.w, q: q, pool: newPool(r, q)}
}

// run claims until the worker drains or this loop's claiming ends, which
// drains the worker; then it waits for the queue's running handlers, and
// stops them if a hard stop cuts the wait short.
func (l *loop) run() loopResult {
	defer l.pool.close()
	res := loopResult{err: l.claim()}
	// However this loop ended, every loop stops claiming.
	l.w.phase.advance(draining)
	l.q.log.Info("worker stopping", "in_flight", len(l.pool.jobs))
	l.pool.giveBackWaiting()
	if !l.pool.drain() {
		res.hard = true
		res.abandoned = l.pool.stop()
	}
	return res
}

// pause waits d, or until a job finishes or claiming ends. It reports
// whether the loop is still claiming. One timer serves every pause of the
// loop: with its slots full the loop pauses once per job.
func (l *loop) pause(d time.Duration) bool {
	if l.timer == nil {
		l.timer = l.w.cfg.Clock.NewTimer(d)
	} else {
		l.timer.Reset(d)
	}
	defer l.timer.Stop()
	select {
	case rep := <-l.pool.done:
		l.pool.finished(rep)
	case <-l.timer.C():
	case <-l.r.draining:
		return false
	case <-l.r.ctx.Done():
		return false
	}
	return true
}

// claim is the claim loop: it receives into free slots and starts a handler
// for each message, until claiming ends.
func (l *loop) claim() error {
	w, p := l.w, &l.pool
	failures := 0
	for {
		wake := p.armWake()
		l.q.hb.Beat()
		p.reapDone()
		if !l.r.claiming() {
			return nil
		}
		if p.free == 0 { // slots full: look again later
			if !l.pause(w.cfg.PollInterval) {
				return nil
			}
			continue
		}
		msgs, err := l.q.mb.Receive(l.r.claims, mailbox.ReceiveOptions{Max: p.free, Visibility: w.cfg.LeaseDuration,
			Wait: w.cfg.LongPoll, Stop: l.r.draining, Wake: wake, Runs: l.q.runs})
		if err != nil {
			if !l.r.claiming() {
				continue // stopping: the loop's top ends it
			}
			if errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrInvalid) {
				return fmt.Errorf("worker: receive: %w", err)
			}
			failures++
			delay := receiveBackoff.Delay(failures)
			l.q.log.Error("receive failed; backing off", "error", err, "failures", failures, "retry_in", delay)
			if !l.pause(delay) {
				return nil
			}
			continue
		}
		failures = 0
		for len(msgs) > 0 {
			n := runLength(msgs, l.q.runs)
			// A stop that raced with this receive is seen here: Shutdown
			// and Stop move the phase before they return, and a receive
			// cut short by them gives back what its claim took: a run
			// goes back with its first message.
			if !l.r.claiming() {
				p.unreceive(msgs[0].Lease)
			} else {
				p.start(msgs[:n])
			}
			msgs = msgs[n:]
		}
	}
}

// runLength is how many of msgs, from the first, make one run: the
// messages of its key that the claim brought along with it, which come
// next, in order. One when the queue claims without runs or the first
// message has no key.
func runLength(msgs []*mailbox.Message, runs bool) int {
	n := 1
	if runs && msgs[0].Key != "" {
		for n < len(msgs) && msgs[n].Key == msgs[0].Key {
			n++
		}
	}
	return n
}

// receiveBackoff spaces out receives while the store fails. Its cap bounds
// how long work waits once the store is back (a database restarted, a
// standby promoted), however long it was away, and keeps the loop's
// heartbeat well inside the watchdog's default threshold; a try every few
// seconds per queue costs a database that is down nothing.
var receiveBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
