package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/leasehold/leasehold/store"
)

// process runs the handler and settles the message by its result, except
// that a message to complete is left to the completer: it reports whether
// it was.
func (w *Worker) process(j *job) bool {
	ctx, cancel := j.ctx, j.cancel
	j.message = Message{Delivery: &j.delivery}
	msg := &j.message
	log := &msgLog{q: j.pool.q, msg: msg} // stays on the stack unless it logs
	attrs := log.attrs()
	maxProcessing := w.maxProcessingTime(msg.Kind)
	w.m.inFlight.Add(ctx, 1, attrs.add...)
	began := w.cfg.Clock.Monotonic()
	// The keeper cancels ctx with ErrMaxProcessingTime past the limit.
	limit := began + maxProcessing
	if limit < began {
		limit = math.MaxInt64 // a limit of "forever" must not wrap around
	}
	w.keeper.limit(j.hold, limit)
	err := w.call(ctx, log, msg)
	took := w.cfg.Clock.Monotonic() - began
	lost, until := w.keeper.drop(j.hold)
	j.until = until
	cause := context.Cause(ctx)
	cancel(nil)
	opCtx := j.pool.r.ops
	w.m.inFlight.Add(opCtx, -1, attrs.add...)
	w.m.duration.Record(opCtx, took.Seconds(), attrs.rec...)
	if !j.state.CompareAndSwap(jobRunning, jobFinishing) {
		j.after = restGone // a hard stop released the lease
		return false
	}
	switch {
	case lost && errors.Is(cause, ErrCancelled):
		w.m.cancelled.Add(opCtx, 1, attrs.add...)
		log.Info("message cancelled while the handler ran; it stays cancelled", "handler_error", err)
		j.after = restKept
	case lost:
		log.Warn("lease lost while the handler ran; not completing", "handler_error", err)
		j.after = restUnsure
	case took >= maxProcessing:
		// Decided by the time taken, not by whether the timer's cancel
		// won the race with the handler's return.
		j.after = w.fail(opCtx, log, msg, fmt.Errorf("%w (%s): handler result: %v", ErrMaxProcessingTime, maxProcessing, err), store.ReasonMaxProcessingTime)
	case errors.Is(cause, ErrShutdown) && err != nil:
		if rerr := w.cfg.Store.Release(opCtx, store.Release{Lease: msg.Lease}); rerr != nil {
			log.Warn("could not release a message stopped by shutdown; it returns when its lease expires", "error", rerr)
			j.after = restUnsure
		} else {
			log.Info("handler stopped by shutdown; message released", "handler_error", err)
			j.after = restGone
		}
	case err != nil && w.giveBack(opCtx, j, log, msg, err):
	case err != nil:
		j.after = w.fail(opCtx, log, msg, err, "")
	default:
		return w.succeeded(opCtx, j, log, msg)
	}
	return false
}

// giveBack gives msg, j's message, back without counting its delivery
// when err asks for that (Snooze, NotStarted), and reports whether it did.
// It is apart from process so that the success path does not pay for the
// error it inspects.
func (w *Worker) giveBack(ctx context.Context, j *job, log *msgLog, msg *Message, err error) bool {
	var snooze *SnoozeError
	isSnooze := errors.As(err, &snooze)
	if !isSnooze && !IsNotStarted(err) {
		return false
	}
	delay := w.retryDelay(msg.Kind, 1)
	if isSnooze {
		delay = snooze.Delay
	}
	rerr := w.cfg.Store.Release(ctx, store.Release{Lease: msg.Lease, Uncount: true, Delay: delay, Snooze: isSnooze})
	j.after = restGone
	switch {
	case rerr != nil:
		j.after = restUnsure
		log.Warn("could not give back a message; it returns when its lease expires", "error", err, "store_error", rerr)
	case isSnooze:
		w.m.snoozed.Add(ctx, 1, log.attrs().add...)
		log.Debug("message snoozed", "retry_in", delay)
	default:
		log.Warn("handler did not start; message given back without counting the delivery", "error", err, "retry_in", delay)
	}
	return true
}

// call runs the handler, turning a panic into a *PanicError, and logs the
// panic: the handler's own, or one that a wrapper inside it recovered and
// returned (see Recover).
func (w *Worker) call(ctx context.Context, log *msgLog, msg *Message) error {
	err := Recover(func() error { return w.cfg.Handler.Handle(ctx, msg) })
	if p, ok := errors.AsType[*PanicError](err); ok {
		log.Error("handler panicked", "panic", fmt.Sprint(p.Value), "stack", string(p.Stack))
	}
	return err
}

// Recover calls f and returns its result, or a *PanicError when it
// panics. A handler that wraps another (with middleware) recovers the
// inner one's panic with it, so that the wrapper sees the run end; the
// worker logs the panic when the error reaches it.
func Recover(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}

// fail records a failed delivery: retried after a backoff delay, or
// dead-lettered when permanent or out of deliveries. A request that is
// dead-lettered is answered with its error in the same transaction, so the
// requester hears of it. It returns what that left the rest of the
// message's run.
func (w *Worker) fail(ctx context.Context, log *msgLog, msg *Message, err error, reason store.DeadReason) int32 {
	permanent := IsPermanent(err)
	f := store.Failure{Lease: msg.Lease, Error: err.Error(), RetryDelay: w.retryDelay(msg.Kind, msg.Attempt), Permanent: permanent, Reason: reason}
	if msg.ReplyTo != "" {
		f.Reply = &store.NewMessage{Queue: msg.ReplyTo, Payload: encodeReply(Reply{RequestID: msg.MessageID, Error: err.Error()})}
	}
	delay := f.RetryDelay
	dead, ferr := w.cfg.Store.Fail(ctx, f)
	switch {
	case ferr != nil:
		log.Warn("could not record the failure; the message will be delivered again", "error", err, "store_error", ferr)
		return restUnsure
	case dead:
		w.m.dead.Add(ctx, 1, log.attrs().add...)
		log.Error("message dead-lettered", "error", err, "permanent", permanent)
		return restKept
	default:
		w.m.failed.Add(ctx, 1, log.attrs().add...)
		log.Warn("handler failed; retrying", "error", err, "retry_in", delay)
		return restGone
	}
}

// maxProcessingTime is how long a handler may run on a message of kind.
func (w *Worker) maxProcessingTime(kind string) time.Duration {
	if k, ok := w.cfg.Kinds[kind]; ok && k.MaxProcessingTime > 0 {
		return k.MaxProcessingTime
	}
	return w.cfg.MaxProcessingTime
}

// retryDelay is the delay before a message of kind that failed its
// delivery number attempt is delivered again.
func (w *Worker) retryDelay(kind string, attempt int) time.Duration {
	if k, ok := w.cfg.Kinds[kind]; ok && k.RetryDelay != nil {
		return k.RetryDelay(attempt)
	}
	return w.cfg.Backoff.Delay(attempt)
}
