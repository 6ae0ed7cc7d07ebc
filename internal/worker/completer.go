package worker

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/leasehold/leasehold/backoff"
	"github.com/leasehold/leasehold/store"
)

// maxCompleteBatch bounds one completer store call.
const maxCompleteBatch = 1000

// completeAttempts bounds how often one completion call is tried.
const completeAttempts = 5

// completeBackoff spaces the tries of a completion call.
var completeBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.NoJitter}

// storeComplete completes cs. A call that fails as a whole (a dropped
// connection, say) is tried again with backoff, completeAttempts times at
// most, while the leases last by the worker's own reckoning (until, on the
// monotonic clock): a handler that finished must not run again because of
// one lost round trip. A refusal (ErrInvalid, ErrClosed), a stop, and the
// per-message results (a lost lease) are final.
func (w *Worker) storeComplete(ctx context.Context, cs []store.Completion, until time.Duration) ([]error, error) {
	for attempt := 1; ; attempt++ {
		errs, err := w.cfg.Store.Complete(ctx, cs)
		if err == nil || attempt == completeAttempts || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrClosed) || ctx.Err() != nil {
			return errs, err
		}
		delay := completeBackoff.Delay(attempt)
		if w.cfg.Clock.Monotonic()+delay >= until {
			return errs, err
		}
		w.log.Warn("completion failed; trying again while the leases last", "messages", len(cs), "error", err, "retry_in", delay)
		t := w.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return errs, err
		case <-t.C():
		}
	}
}

// completer completes the jobs handed to it: everything queued up when it
// looks, in one store call, so that under load completions share
// transactions while a lone completion waits for nobody. It runs until
// complete is closed.
func (r *run) completer() {
	w := r.w
	batch := make([]*job, 0, min(maxCompleteBatch, w.cfg.concurrency))
	cs := make([]store.Completion, 0, cap(batch))
	for j := range r.complete {
		batch = append(batch[:0], j)
	more:
		for len(batch) < maxCompleteBatch {
			select {
			case j, ok := <-r.complete:
				if !ok {
					break more
				}
				batch = append(batch, j)
			default:
				break more
			}
		}
		cs = cs[:0]
		until := time.Duration(math.MaxInt64)
		for _, j := range batch {
			cs = append(cs, j.completion)
			until = min(until, j.until)
		}
		errs, err := w.storeComplete(r.ops, cs, until)
		if errors.Is(err, store.ErrInvalid) {
			// One bad completion must not sink the batch: each goes alone.
			for _, j := range batch {
				w.complete(r.ops, &msgLog{q: j.l.q, msg: j.handled}, j.handled, j.until)
				j.handled, j.completion = nil, store.Completion{}
				j.l.done <- j
			}
			continue
		}
		for i, j := range batch {
			e := err
			if e == nil {
				e = errs[i]
			}
			w.completed(r.ops, &msgLog{q: j.l.q, msg: j.handled}, e)
			j.handled, j.completion = nil, store.Completion{}
			j.l.done <- j
		}
	}
}
