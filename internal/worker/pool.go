package worker

import (
	"context"
	"sync/atomic"

	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/store"
)

// pool runs one queue's handlers, each on a goroutine it keeps, and counts
// the queue's free slots. Its fields are owned by the goroutine of the
// queue's claim loop; handler goroutines and the completer only send on
// done and receive from work.
type pool struct {
	r *run
	w *Worker
	q *queue
	// done takes the reports of handlers and of the completer (see
	// report); buffered for every report that can be outstanding, so that
	// neither ever blocks.
	done chan report
	// work hands jobs to idle handler goroutines. Goroutines are kept
	// rather than started per message: a fresh goroutine's stack grows on
	// every message, which costs more than the handoff.
	work chan *job
	idle int // goroutines waiting on work, by the claim loop's count
	// jobs are the started jobs not yet settled, a completion pending
	// included; those of a run that wait for it are kept by the run's
	// started job (job.rest).
	jobs map[*job]struct{}
	// free counts the slots that no message holds, started or waiting. A
	// message whose handler succeeded gives its slot back when it is
	// handed to the completer, as a worker runs handlers, not store
	// calls; the completer's queue bounds how many wait for it.
	free int
	// wake, on a queue with runs, is closed by the report of a job that
	// has the rest of its run waiting for it, so that the claim loop's
	// receive stops waiting and the run goes on; the claim loop sets a
	// fresh one before it takes reports.
	wake atomic.Pointer[chan struct{}]
}

// report tells the claim loop that a job gave back its slot, its
// handler's goroutine now idle, or was settled, or both at once.
type report struct {
	j       *job
	slot    bool
	settled bool
}

func newPool(r *run, q *queue) pool {
	// Reports not yet taken are at most two for each job that holds a
	// slot, and one for each whose slot came back: a job the completer
	// held, in its queue or its batch, when the last report taken was
	// sent, as reports are taken in the order sent.
	n := 2*q.concurrency + cap(r.complete) + r.w.completeBatch()
	return pool{r: r, w: r.w, q: q, done: make(chan report, n), work: make(chan *job),
		jobs: make(map[*job]struct{}), free: q.concurrency}
}

// start takes the messages of one run, each into a slot and under the
// lease keeper, and starts a handler for the first; the others wait for
// it (see next). Without runs, a run is one message.
func (p *pool) start(run []*mailbox.Message) {
	j := p.newJob(run[0])
	if len(run) > 1 {
		j.rest = make([]*job, len(run)-1)
		for i, msg := range run[1:] {
			j.rest[i] = p.newJob(msg)
		}
	}
	p.free -= len(run)
	p.launch(j)
}

// settled hands settled j to the claim loop, with its slot unless that
// went back already, and wakes the loop's receive when the rest of j's
// run waits for it.
func (p *pool) settled(j *job, slot bool) {
	p.done <- report{j: j, slot: slot, settled: true}
	if j.runs {
		if ch := p.wake.Swap(nil); ch != nil {
			close(*ch)
		}
	}
}

// armWake returns the channel that the next report of a job with the
// rest of a run behind it closes; nil on a queue without runs. The claim
// loop arms it before it takes reports, so that none is missed.
func (p *pool) armWake() <-chan struct{} {
	if !p.q.runs {
		return nil
	}
	ch := make(chan struct{})
	p.wake.Store(&ch)
	return ch
}

// newJob is msg's job, its lease kept from now on.
func (p *pool) newJob(msg *mailbox.Message) *job {
	w := p.w
	ctx, cancel := context.WithCancelCause(p.r.base)
	j := &job{pool: p, delivery: *msg.Delivery, ctx: ctx, cancel: cancel}
	j.hold = w.keeper.hold(msg.Lease, p.q.keeperName, msg.LeaseDeadline(), cancel)
	w.m.claimed.Add(ctx, 1, p.q.attrs.of(msg.Kind).add...)
	return j
}

// launch runs a handler for j, whose slot is taken, on a kept goroutine,
// or a new one.
func (p *pool) launch(j *job) {
	j.runs = len(j.rest) > 0
	p.jobs[j] = struct{}{}
	if p.idle > 0 {
		// A goroutine that reported done is at, or on its way to, the
		// receive.
		p.idle--
		p.work <- j
		return
	}
	go p.handle(j)
}

// handle runs j, then every job handed to it, until work is closed. A
// job handed to the completer gives its slot back at once, unless the
// rest of its run waits for its completion.
func (p *pool) handle(j *job) {
	for {
		if p.w.process(j) {
			// The completer reports it settled, with its slot when the
			// rest of its run waits for it.
			p.r.complete <- j
			if !j.runs {
				p.done <- report{j: j, slot: true}
			}
		} else {
			p.settled(j, true)
		}
		var ok bool
		if j, ok = <-p.work; !ok {
			return
		}
	}
}

// close lets the idle handler goroutines end, and the others once their
// job is done.
func (p *pool) close() { close(p.work) }

// finished takes what rep reports: a slot back, its goroutine idle,
// and a job settled, which goes on with the rest of its run.
func (p *pool) finished(rep report) {
	if rep.slot {
		p.free++
		p.idle++
	}
	if j := rep.j; rep.settled {
		delete(p.jobs, j)
		if len(j.rest) > 0 {
			p.next(j)
		}
	}
}

// reapDone takes every finished job without blocking.
func (p *pool) reapDone() {
	for {
		select {
		case rep := <-p.done:
			p.finished(rep)
		default:
			return
		}
	}
}

// drain waits for running handlers. It reports false when the wait was cut
// short by a hard stop.
func (p *pool) drain() bool {
	for len(p.jobs) > 0 {
		select {
		case rep := <-p.done:
			p.finished(rep)
		case <-p.w.phase.reached(hardStop):
			return false
		}
	}
	return true
}

// stop cancels every running handler with cause ErrShutdown and settles
// them (see settle); it returns how many were abandoned.
func (p *pool) stop() int {
	for j := range p.jobs {
		j.cancel(ErrShutdown)
	}
	return p.settle()
}

// settle waits HardStopWait for cancelled handlers, then releases the
// leases of those still running and returns how many there were.
func (p *pool) settle() int {
	w := p.w
	if len(p.jobs) > 0 {
		t := w.cfg.Clock.NewTimer(w.cfg.HardStopWait)
	wait:
		for len(p.jobs) > 0 {
			select {
			case rep := <-p.done:
				p.finished(rep)
			case <-t.C():
				break wait
			}
		}
		t.Stop()
	}
	abandoned := 0
	finishing := 0
	for j := range p.jobs {
		if !j.state.CompareAndSwap(jobRunning, jobReleased) {
			finishing++ // settling its message itself; wait for it below
			continue
		}
		abandoned++
		w.keeper.drop(j.hold)
		ctx, cancel := w.hardStopContext()
		err := w.cfg.Store.Release(ctx, store.Release{Lease: j.delivery.Lease})
		cancel()
		p.q.log.Warn("handler did not return after cancellation; lease released", "message_id", j.delivery.MessageID, "error", err)
	}
	// Jobs settling their own message get HardStopWait more; then their
	// store calls are cancelled. Run does not return while they talk to the
	// store.
	if finishing > 0 {
		t := w.cfg.Clock.AfterFunc(w.cfg.HardStopWait, p.r.cancelOps)
		// An abandoned handler that returns now reports done too: only
		// jobs that were settling count.
		for finishing > 0 {
			rep := <-p.done
			if rep.settled && rep.j.state.Load() == jobFinishing {
				finishing--
			}
			p.finished(rep)
		}
		t.Stop()
	}
	return abandoned
}
