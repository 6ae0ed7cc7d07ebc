package worker

import (
	"context"
	"errors"

	"github.com/leasehold/leasehold/store"
)

// What a job's settling left the later messages of its run (see
// store.Claim's Runs), which the job's handler decides and the claim
// loop reads once the job is done.
const (
	// restKept: the job was completed, dead-lettered or cancelled; the
	// rest of its run keep their leases and may go on.
	restKept int32 = iota
	// restGone: the job went back to the queue (a retry, a release, a
	// snooze) and the store took the rest of its run back with it: their
	// leases are lost.
	restGone
	// restUnsure: the job's lease was lost, or its settling failed, so it
	// is not known whether the store still holds the rest under their
	// leases; they are given back, as they must not run before the job
	// runs again.
	restUnsure
)

// next goes on with the rest of j's run once j is settled: its next
// message starts when j's settling left it its lease and the worker is
// still claiming; otherwise the rest of the run is given back. A waiting
// message that was cancelled is passed over, as the store lets a run go
// on past it; one whose lease was lost otherwise gives back those behind
// it.
func (p *pool) next(j *job) {
	rest := j.rest
	j.rest = nil
	for len(rest) > 0 && j.after == restKept && p.r.claiming() {
		n := rest[0]
		if n.ctx.Err() == nil {
			n.rest = rest[1:]
			p.launch(n)
			return
		}
		if !errors.Is(context.Cause(n.ctx), ErrCancelled) {
			break
		}
		p.drop(n)
		rest = rest[1:]
	}
	if len(rest) > 0 {
		p.giveBack(rest, j.after != restGone)
	}
}

// giveBack stops keeping the leases of rest, messages of a run that
// never started, and frees their slots. With release it gives them back
// to the queue, uncounted: releasing the first takes the others with it.
// Without, the store has taken them back already.
func (p *pool) giveBack(rest []*job, release bool) {
	for _, n := range rest {
		p.drop(n)
	}
	if release {
		p.unreceive(rest[0].delivery.Lease)
	}
}

// drop stops keeping the lease of n, a message of a run that never
// started, and frees its slot.
func (p *pool) drop(n *job) {
	p.w.keeper.drop(n.hold)
	n.cancel(nil)
	p.free++
}

// giveBackWaiting gives back, at once, the messages of runs that wait
// for a running handler: the worker is stopping, and they never started.
func (p *pool) giveBackWaiting() {
	for j := range p.jobs {
		if len(j.rest) > 0 {
			p.giveBack(j.rest, true)
			j.rest = nil
		}
	}
}

// unreceive gives back a message received but never started, under lease
// l: at once, and without counting the delivery its claim counted. The
// later messages of its run, if any, go back with it.
func (p *pool) unreceive(l store.Lease) {
	ctx, cancel := p.w.hardStopContext()
	defer cancel()
	if err := p.w.cfg.Store.Release(ctx, store.Release{Lease: l, Uncount: true}); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		p.q.log.Warn("could not give back a message that did not start; it returns when its lease expires", "message_id", l.MessageID, "error", err)
	}
}
