package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/store"
)

// maxCompleteBatch bounds one completer store call.
const maxCompleteBatch = 1000

// completeAttempts bounds how often one completion call is tried.
const completeAttempts = 5

// completeBackoff spaces the tries of a completion call.
var completeBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.NoJitter}

// succeeded settles a job whose handler returned nil. With one slot in the
// whole worker there is one completion at a time and nothing to batch, so
// the message is completed at once, without the handoff; otherwise the job
// is readied for the completer, and succeeded reports true: the caller hands
// it over.
func (w *Worker) succeeded(ctx context.Context, j *job, log *msgLog, msg *Message) bool {
	if w.concurrency == 1 {
		j.after = w.complete(ctx, log, msg, j.until)
		return false
	}
	j.handled, j.completion = msg, w.completion(msg)
	return true
}

// complete completes msg, sending the reply when it names a ReplyTo queue;
// its lease ends at until, on the monotonic clock. It returns what that
// left the rest of the message's run.
func (w *Worker) complete(ctx context.Context, log *msgLog, msg *Message, until time.Duration) int32 {
	errs, err := w.storeComplete(ctx, []store.Completion{w.completion(msg)}, until)
	if err == nil {
		err = errs[0]
	}
	if errors.Is(err, store.ErrInvalid) {
		// The store refuses the completion itself (a reply too large, say):
		// retrying cannot help, so the message fails for good, with why
		// (for a request, in its error reply).
		return w.fail(ctx, log, msg, Permanent(fmt.Errorf("cannot complete: %w", err)), "")
	}
	return w.completed(ctx, log, err)
}

// completion is the store's completion of msg, with its reply when it names
// a ReplyTo queue.
func (w *Worker) completion(msg *Message) store.Completion {
	c := store.Completion{Lease: msg.Lease}
	if msg.ReplyTo != "" {
		r := Reply{RequestID: msg.MessageID}
		if msg.hasReply {
			r.Output = msg.reply
		}
		c.Reply = &store.NewMessage{Queue: msg.ReplyTo, Payload: encodeReply(r)}
	}
	return c
}

// completed records the outcome of one completion, and returns what it
// left the rest of the message's run.
func (w *Worker) completed(ctx context.Context, log *msgLog, err error) int32 {
	if err != nil {
		log.Warn("completion refused; the message will be delivered again", "error", err)
		return restUnsure
	}
	w.m.completed.Add(ctx, 1, log.attrs().add...)
	if log.q.log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("message completed")
	}
	return restKept
}

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

// completeBatch is the most completions one completer batch holds: no
// more than the worker's slots, so that with as many in its queue the
// completions waiting stay bounded (see pool).
func (w *Worker) completeBatch() int { return min(maxCompleteBatch, w.concurrency) }

// completer completes the jobs handed to it: everything queued up when it
// looks, in one store call, so that under load completions share
// transactions while a lone completion waits for nobody. It runs until
// complete is closed.
func (r *run) completer() {
	w := r.w
	limit := w.completeBatch()
	batch := make([]*job, 0, limit)
	cs := make([]store.Completion, 0, limit)
	for j := range r.complete {
		batch = append(batch[:0], j)
	more:
		for len(batch) < limit {
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
				j.after = w.complete(r.ops, &msgLog{q: j.pool.q, msg: j.handled}, j.handled, j.until)
				j.handled, j.completion = nil, store.Completion{}
				j.pool.settled(j, j.runs)
			}
			continue
		}
		for i, j := range batch {
			e := err
			if e == nil {
				e = errs[i]
			}
			j.after = w.completed(r.ops, &msgLog{q: j.pool.q, msg: j.handled}, e)
			j.handled, j.completion = nil, store.Completion{}
			j.pool.settled(j, j.runs)
		}
	}
}
