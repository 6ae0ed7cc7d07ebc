package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/backoff"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/mailbox"
	"github.com/leasehold/leasehold/store"
)

// Worker claims messages of one queue and runs a handler on each, under a
// lease that its lease keeper keeps alive; see the package documentation
// for its rules.
type Worker struct {
	cfg    resolved
	mb     *mailbox.Mailbox
	keeper *keeper
	reaper *Reaper
	hb     *Heartbeat
	log    *slog.Logger
	m      *workerMetrics

	state    runstate.State
	hardOnce sync.Once
	hard     chan struct{} // closed when the drain must end now
	hardStop atomic.Bool   // handlers had to be cancelled
	draining atomic.Bool   // claiming has stopped, for good
	pauseOne sync.Once
	pause    chan struct{} // closed by Drain
}

// job states: a running job's outcome is settled once, either by the job
// (finishing) or by a hard stop (released).
const (
	jobRunning int32 = iota
	jobFinishing
	jobReleased
)

type job struct {
	ops context.Context // of the store calls that settle the message
	// handled and completion are set when the job is handed to the
	// completer.
	handled    *Message
	completion store.Completion
	msg        *mailbox.Message
	hold       *hold
	// until is when the lease ends, on the monotonic clock, by the
	// worker's reckoning once the handler returned.
	until  time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	state  atomic.Int32
}

// New returns a worker for cfg, or an error naming every field that is out
// of range.
func New(cfg Config) (*Worker, error) {
	r, err := cfg.resolve(true)
	if err != nil {
		return nil, err
	}
	mb, err := mailbox.New(mailbox.Config{Store: r.Store, Queue: r.Queue, WorkerID: r.WorkerID, PollInterval: r.PollInterval, Clock: r.Clock})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	m, err := newWorkerMetrics(r.MeterProvider, r.Queue)
	if err != nil {
		return nil, fmt.Errorf("worker: metrics: %w", err)
	}
	log := r.Logger.With("worker_id", r.WorkerID, "queue", r.Queue)
	w := &Worker{cfg: r, mb: mb, hb: NewHeartbeat(r.Clock), log: log, m: m, hard: make(chan struct{}), pause: make(chan struct{})}
	w.keeper = newKeeper(r.Store, r.Clock, r.extender, log, m)
	if !r.DisableReaper {
		w.reaper, err = NewReaper(ReaperConfig{Store: r.Store, LeaseDuration: r.LeaseDuration, Interval: r.ReapInterval,
			Clock: r.Clock, Logger: log, MeterProvider: r.MeterProvider})
		if err != nil {
			return nil, err
		}
	}
	return w, nil
}

// ID returns the worker id.
func (w *Worker) ID() string { return w.cfg.WorkerID }

// Heartbeat beats whenever the claim loop goes round, at least every
// PollInterval while it runs: give it to a Watchdog.
func (w *Worker) Heartbeat() *Heartbeat { return w.hb }

// Running reports whether Run is running.
func (w *Worker) Running() bool { return w.state.Running() }

// Draining reports whether the worker has stopped claiming: Shutdown or
// Drain was called, or Run is ending.
func (w *Worker) Draining() bool { return w.draining.Load() || w.paused() }

// paused reports whether Drain was called.
func (w *Worker) paused() bool {
	select {
	case <-w.pause:
		return true
	default:
		return false
	}
}

// Drain stops claiming but keeps Run going: running handlers finish and
// their leases are kept, and the process stays up (for a deployment that
// takes the worker out of rotation before stopping it). Readiness fails
// from then on.
func (w *Worker) Drain() {
	w.pauseOne.Do(func() { close(w.pause) })
}

// Ready reports whether the worker should be given work: nil unless it is
// draining or its store cannot be reached.
func (w *Worker) Ready(ctx context.Context) error {
	if w.Draining() {
		return errors.New("worker is draining")
	}
	if err := w.cfg.Store.Ping(ctx); err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}
	return nil
}

// Run claims and handles messages until Shutdown is called, ctx ends,
// MaxIterations receives have been made, or the store is closed. It returns
// nil after a clean stop.
//
// A graceful stop (Shutdown, MaxIterations) claims nothing more, releases at
// once and without counting a delivery any message received but not
// started, and waits for running handlers while the lease keeper keeps their
// leases alive. The end of ctx, or of Shutdown's patience, is a hard stop:
// running handlers' contexts are cancelled with cause ErrShutdown, and after
// HardStopWait the leases of those that have not returned are released so
// that another worker can take the messages at once; Run then returns an
// error wrapping ErrShutdown. The lease keeper stops last.
//
// Run may be called once; Shutdown before Run makes it return nil at once.
func (w *Worker) Run(ctx context.Context) error {
	ok, err := w.state.Begin()
	if !ok {
		return err
	}
	defer w.state.End()
	defer w.draining.Store(true)

	// The keeper, the reaper and the handlers outlive ctx long enough to
	// settle every lease. Handlers' contexts are not children of a
	// cancellable parent (a hard stop cancels each) because a shared
	// parent costs a map insert and delete per message.
	base := context.WithoutCancel(ctx)
	keeperCtx, stopKeeper := context.WithCancel(base)
	var bg sync.WaitGroup
	bg.Go(func() { w.keeper.run(keeperCtx) })
	reaperCtx, stopReaper := context.WithCancel(ctx)
	if w.reaper != nil {
		bg.Go(func() { w.reaper.loop(reaperCtx, nil) })
	}
	defer func() {
		stopReaper()
		stopKeeper()
		bg.Wait()
	}()

	// claims ends when the worker stops claiming for good; receives, also
	// when it drains.
	claims, stopClaims := context.WithCancel(ctx)
	defer stopClaims()
	receives, stopReceives := context.WithCancel(claims)
	stopping := w.state.Stopping()
	bg.Go(func() {
		select {
		case <-stopping:
			stopClaims()
		case <-w.pause:
			stopReceives()
			select {
			case <-stopping:
				stopClaims()
			case <-claims.Done():
			}
		case <-claims.Done():
		}
	})

	l := &loop{w: w, base: base, done: make(chan *job, w.cfg.Concurrency), work: make(chan *job),
		jobs: make(map[*job]struct{}), free: w.cfg.Concurrency}
	l.ops, l.cancelOps = context.WithCancel(base)
	defer l.cancelOps()
	l.complete = make(chan *job, w.cfg.Concurrency)
	var completer sync.WaitGroup
	completer.Go(l.completer)
	defer func() {
		close(l.complete)
		completer.Wait()
	}()
	defer close(l.work)
	loopErr := l.claim(claims, receives)
	w.draining.Store(true)
	// However the claim loop ended, the drain gets at most ShutdownTimeout.
	drainLimit := w.cfg.Clock.AfterFunc(w.cfg.ShutdownTimeout, w.hardStopNow)
	defer drainLimit.Stop()
	w.log.Info("worker stopping", "in_flight", len(l.jobs))
	if !l.drain(ctx) {
		w.hardStop.Store(true)
		for j := range l.jobs {
			j.cancel(ErrShutdown)
		}
		if abandoned := l.settle(); abandoned > 0 {
			loopErr = errors.Join(loopErr, fmt.Errorf("worker: %d %w", abandoned, ErrAbandoned))
		}
		loopErr = errors.Join(loopErr, fmt.Errorf("worker: hard stop: %w", ErrShutdown))
	}
	w.log.Info("worker stopped")
	return loopErr
}

// Shutdown stops the worker gracefully and waits for Run to return: it
// claims nothing more and lets running handlers finish, for up to
// ShutdownTimeout or until ctx ends, whichever comes first, before a hard
// stop (see Run). It returns nil when everything in flight finished, and an
// error otherwise. Safe before Run, more than once and from several
// goroutines.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.draining.Store(true)
	w.state.RequestStop()
	t := w.cfg.Clock.AfterFunc(w.cfg.ShutdownTimeout, w.hardStopNow)
	defer t.Stop()
	select {
	case <-w.state.Done():
	default:
		select {
		case <-w.state.Done():
		case <-ctx.Done():
			// A hard stop: Run goes on to release the leases of what has
			// not finished, within HardStopWait and its store calls'
			// timeouts; Shutdown keeps to ctx.
			w.hardStopNow()
			return fmt.Errorf("worker: shutdown: %w", context.Cause(ctx))
		}
	}
	if w.hardStop.Load() {
		return fmt.Errorf("worker: shutdown: handlers still running after the shutdown timeout were stopped: %w", ErrShutdown)
	}
	return nil
}

// Stop is a hard stop: running handlers are cancelled at once with cause
// ErrShutdown. It waits for Run to return, and is safe before Run.
func (w *Worker) Stop() {
	w.draining.Store(true)
	w.state.RequestStop()
	w.hardStopNow()
	<-w.state.Done()
}

func (w *Worker) hardStopNow() { w.hardOnce.Do(func() { close(w.hard) }) }

// loop is the state of one Run, owned by Run's goroutine.
type loop struct {
	w    *Worker
	base context.Context // of handlers
	// ops is the context of the store calls that settle messages; a hard
	// stop cancels it when they outlast HardStopWait.
	ops       context.Context
	cancelOps context.CancelFunc
	done      chan *job // finished jobs; buffered for every slot so jobs never block
	// work hands jobs to idle handler goroutines. Goroutines are kept
	// rather than started per message: a fresh goroutine's stack grows on
	// every message, which costs more than the handoff.
	work chan *job
	idle int // goroutines waiting on work, by the claim loop's count
	// complete takes jobs whose handler succeeded to the completer, which
	// completes whatever has queued up in one store call and then reports
	// each job done. Buffered for every slot.
	complete chan *job
	jobs     map[*job]struct{}
	free     int
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
// whether claims is still open.
func (l *loop) pause(claims context.Context, d time.Duration) bool {
	t := l.w.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case j := <-l.done:
		l.finished(j)
	case <-t.C():
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
		w.hb.Beat()
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
		msgs, err := w.mb.Receive(receives, mailbox.ReceiveOptions{Max: l.free, Visibility: w.cfg.LeaseDuration, Wait: w.cfg.LongPoll})
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
			w.log.Error("receive failed; backing off", "error", err, "failures", failures, "retry_in", delay)
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
				w.unreceive(msg)
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
		w.log.Warn("handler did not return after cancellation; lease released", "message_id", j.msg.MessageID, "error", err)
	}
	// Jobs settling their own message get HardStopWait more; then their
	// store calls are cancelled. Run does not return while they talk to the
	// store.
	if finishing > 0 {
		t := w.cfg.Clock.AfterFunc(w.cfg.HardStopWait, l.cancelOps)
		for ; finishing > 0; finishing-- {
			l.finished(<-l.done)
		}
		t.Stop()
	}
	return abandoned
}

// hardStopContext bounds a store call made while the worker stops: a
// stop must not wait on a database that does not answer.
func (w *Worker) hardStopContext() (context.Context, context.CancelFunc) {
	return clock.WithTimeout(context.Background(), w.cfg.Clock, w.cfg.HardStopWait)
}

func (w *Worker) unreceive(msg *mailbox.Message) {
	ctx, cancel := w.hardStopContext()
	defer cancel()
	if err := msg.Unreceive(ctx); err != nil {
		w.log.Warn("could not release a message received during shutdown; it returns when its lease expires", "message_id", msg.MessageID, "error", err)
	}
}

// start runs a handler for msg in a new goroutine.
func (l *loop) start(msg *mailbox.Message) {
	w := l.w
	ctx, cancel := context.WithCancelCause(l.base)
	j := &job{ops: l.ops, msg: msg, ctx: ctx, cancel: cancel}
	j.hold = w.keeper.hold(msg.Lease, msg.LeaseDeadline(), func() { cancel(store.ErrLeaseLost) })
	l.jobs[j] = struct{}{}
	l.free--
	w.m.claimed.Add(ctx, 1, w.m.attrs)
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
			l.complete <- j // the completer reports it done
		} else {
			l.done <- j
		}
		var ok bool
		if j, ok = <-l.work; !ok {
			return
		}
	}
}

// process runs the handler and settles the message by its result, except
// that a message to complete is left to the completer: it reports whether
// it was.
func (w *Worker) process(j *job) bool {
	ctx, cancel := j.ctx, j.cancel
	msg := &Message{Delivery: j.msg.Delivery}
	w.m.inFlight.Add(ctx, 1, w.m.attrs)
	limit := w.cfg.Clock.AfterFunc(w.cfg.MaxProcessingTime, func() { cancel(ErrMaxProcessingTime) })
	began := w.cfg.Clock.Monotonic()
	err := w.call(ctx, msg)
	took := w.cfg.Clock.Monotonic() - began
	limit.Stop()
	lost, until := w.keeper.drop(j.hold)
	j.until = until
	cause := context.Cause(ctx)
	cancel(nil)
	opCtx := j.ops
	w.m.inFlight.Add(opCtx, -1, w.m.attrs)
	w.m.duration.Record(opCtx, took.Seconds(), w.m.attrs)
	if !j.state.CompareAndSwap(jobRunning, jobFinishing) {
		return false // a hard stop released the lease
	}
	log := &msgLog{w: w, msg: msg} // stays on the stack unless it logs
	switch {
	case lost:
		log.Warn("lease lost while the handler ran; not completing", "handler_error", err)
	case took >= w.cfg.MaxProcessingTime:
		// Decided by the time taken, not by whether the timer's cancel
		// won the race with the handler's return.
		w.fail(opCtx, log, msg, fmt.Errorf("%w (%s): handler result: %v", ErrMaxProcessingTime, w.cfg.MaxProcessingTime, err), store.ReasonMaxProcessingTime)
	case errors.Is(cause, ErrShutdown) && err != nil:
		if rerr := w.cfg.Store.Release(opCtx, store.Release{Lease: msg.Lease}); rerr != nil {
			log.Warn("could not release a message stopped by shutdown; it returns when its lease expires", "error", rerr)
		} else {
			log.Info("handler stopped by shutdown; message released", "handler_error", err)
		}
	case err != nil && w.giveBack(opCtx, log, msg, err):
	case err != nil:
		w.fail(opCtx, log, msg, err, "")
	default:
		if w.cfg.Concurrency == 1 {
			// One slot, one completion at a time: nothing to batch, so
			// skip the handoff.
			w.complete(opCtx, log, msg, until)
			return false
		}
		j.handled, j.completion = msg, w.completion(msg)
		return true
	}
	return false
}

// giveBack gives msg back without counting its delivery when err asks for
// that (Snooze, NotStarted), and reports whether it did. It is apart from
// process so that the success path does not pay for the error it inspects.
func (w *Worker) giveBack(ctx context.Context, log *msgLog, msg *Message, err error) bool {
	var snooze *SnoozeError
	isSnooze := errors.As(err, &snooze)
	if !isSnooze && !IsNotStarted(err) {
		return false
	}
	delay := w.cfg.Backoff.Delay(1)
	if isSnooze {
		delay = snooze.Delay
	}
	switch rerr := w.cfg.Store.Release(ctx, store.Release{Lease: msg.Lease, Uncount: true, Delay: delay}); {
	case rerr != nil:
		log.Warn("could not give back a message; it returns when its lease expires", "error", err, "store_error", rerr)
	case isSnooze:
		log.Debug("message snoozed", "retry_in", delay)
	default:
		log.Warn("handler did not start; message given back without counting the delivery", "error", err, "retry_in", delay)
	}
	return true
}

// call runs the handler, turning a panic into a *PanicError.
func (w *Worker) call(ctx context.Context, msg *Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			w.log.Error("handler panicked", "message_id", msg.MessageID, "panic", fmt.Sprint(v), "stack", string(stack))
			err = &PanicError{Value: v, Stack: stack}
		}
	}()
	return w.cfg.Handler.Handle(ctx, msg)
}

// complete completes msg, sending the reply when it names a ReplyTo queue;
// its lease ends at until, on the monotonic clock.
func (w *Worker) complete(ctx context.Context, log *msgLog, msg *Message, until time.Duration) {
	errs, err := w.storeComplete(ctx, []store.Completion{w.completion(msg)}, until)
	if err == nil {
		err = errs[0]
	}
	if errors.Is(err, store.ErrInvalid) {
		// The store refuses the completion itself (a reply too large, say):
		// retrying cannot help, so the message fails for good, with why
		// (for a request, in its error reply).
		w.fail(ctx, log, msg, Permanent(fmt.Errorf("cannot complete: %w", err)), "")
		return
	}
	w.completed(ctx, log, err)
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

// completed records the outcome of one completion.
func (w *Worker) completed(ctx context.Context, log *msgLog, err error) {
	if err != nil {
		log.Warn("completion refused; the message will be delivered again", "error", err)
		return
	}
	w.m.completed.Add(ctx, 1, w.m.attrs)
	if w.log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("message completed")
	}
}

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
func (l *loop) completer() {
	w := l.w
	batch := make([]*job, 0, min(maxCompleteBatch, w.cfg.Concurrency))
	cs := make([]store.Completion, 0, cap(batch))
	for j := range l.complete {
		batch = append(batch[:0], j)
	more:
		for len(batch) < maxCompleteBatch {
			select {
			case j, ok := <-l.complete:
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
		errs, err := w.storeComplete(l.ops, cs, until)
		if errors.Is(err, store.ErrInvalid) {
			// One bad completion must not sink the batch: each goes alone.
			for _, j := range batch {
				w.complete(l.ops, &msgLog{w: w, msg: j.handled}, j.handled, j.until)
				j.handled, j.completion = nil, store.Completion{}
				l.done <- j
			}
			continue
		}
		for i, j := range batch {
			e := err
			if e == nil {
				e = errs[i]
			}
			w.completed(l.ops, &msgLog{w: w, msg: j.handled}, e)
			j.handled, j.completion = nil, store.Completion{}
			l.done <- j
		}
	}
}

// msgLog logs about one message. The logger with the message's attributes
// is built on first use: most messages log nothing.
type msgLog struct {
	w   *Worker
	msg *Message
	l   *slog.Logger
}

func (m *msgLog) logger() *slog.Logger {
	if m.l == nil {
		m.l = m.w.log.With("message_id", m.msg.MessageID, "attempt", m.msg.Attempt, "fencing_token", m.msg.FencingToken)
	}
	return m.l
}

func (m *msgLog) Debug(msg string, args ...any) { m.logger().Debug(msg, args...) }
func (m *msgLog) Info(msg string, args ...any)  { m.logger().Info(msg, args...) }
func (m *msgLog) Warn(msg string, args ...any)  { m.logger().Warn(msg, args...) }
func (m *msgLog) Error(msg string, args ...any) { m.logger().Error(msg, args...) }

// fail records a failed delivery: retried after a backoff delay, or
// dead-lettered when permanent or out of deliveries. A request that is
// dead-lettered is answered with its error in the same transaction, so the
// requester hears of it.
func (w *Worker) fail(ctx context.Context, log *msgLog, msg *Message, err error, reason store.DeadReason) {
	permanent := IsPermanent(err)
	f := store.Failure{Lease: msg.Lease, Error: err.Error(), RetryDelay: w.cfg.Backoff.Delay(msg.Attempt), Permanent: permanent, Reason: reason}
	if msg.ReplyTo != "" {
		f.Reply = &store.NewMessage{Queue: msg.ReplyTo, Payload: encodeReply(Reply{RequestID: msg.MessageID, Error: err.Error()})}
	}
	delay := f.RetryDelay
	dead, ferr := w.cfg.Store.Fail(ctx, f)
	switch {
	case ferr != nil:
		log.Warn("could not record the failure; the message will be delivered again", "error", err, "store_error", ferr)
	case dead:
		w.m.dead.Add(ctx, 1, w.m.attrs)
		log.Error("message dead-lettered", "error", err, "permanent", permanent)
	default:
		w.m.failed.Add(ctx, 1, w.m.attrs)
		log.Warn("handler failed; retrying", "error", err, "retry_in", delay)
	}
}
