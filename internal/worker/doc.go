// Package worker turns a store into reliable processing: the claim loops,
// the handlers, the lease keeper, heartbeats and the watchdog. Its
// caller, the client, has checked the settings and filled in their
// defaults; the worker takes its Config as it is.
//
// # The worker loop
//
// A Worker claims messages of its queues, for each at most as many as
// that queue has free handler slots (its Concurrency), long-polling when
// the queue is empty. The queues of one worker share its lease keeper, its
// completer and its upkeep. A kind of message may have a maximum
// processing time and a retry delay of its own (Kinds). Handlers run on
// goroutines the worker keeps, one message at a time each. A message whose
// handler succeeded gives its slot back as it goes to the completer,
// unless the rest of its run waits for it (or the worker has one slot in
// all, and completes it at once); its completion is awaited apart, by a
// drain and a hard stop too. The completer's queue holds as many
// completions as the worker has slots, and a handler that finds it full
// waits with its slot held, so the completions pending never outgrow the
// slots and one batch. Any other outcome is settled with the slot held.
// The handler's result decides:
//
//   - the handler returns nil: the message is completed;
//   - it returns an error: the message is retried after a backoff delay, or
//     dead-lettered once its deliveries are used up;
//   - it returns an error marked with Permanent: dead-lettered at once;
//   - it returns an error marked with NotStarted: given back without
//     counting the delivery, visible again after the first retry delay;
//   - it returns Snooze(d): given back without counting the delivery,
//     visible again after d;
//   - it panics: the panic is logged with its stack and counts as a failure.
//
// # Runs
//
// A queue with Runs claims with runs (see store.Claim): a keyed message
// comes with the next messages of its key, each in a slot of the queue
// and under a lease of its own that the lease keeper renews with the
// others. They run one at a time, in order: the next starts, on the
// claim loop, once the one before it is settled, when the settling left
// it its lease: the one before was completed, dead-lettered or
// cancelled. When it was retried, released or snoozed, the store has
// taken the rest of the run back with it, and the worker lets them go
// without running them; when its lease was lost or its settling failed,
// the worker gives the rest back itself, uncounted, as the run must not
// go on before the message runs again. The report of a message with the
// rest of its run behind it wakes the claim loop's receive, so that the
// run does not wait for a long poll to end. A drain gives back at once,
// uncounted, the messages of runs that have not started.
//
// A message that names a ReplyTo queue gets a reply there (see Reply) in the
// same transaction as its completion, or, when it fails for good, in the
// same transaction as its dead-lettering, with the error.
//
// A completion whose store call fails as a whole (a dropped connection) is
// tried again with backoff, up to 5 times, while the message's lease lasts
// by the worker's own reckoning, so that one lost round trip does not make
// a finished handler run again.
//
// # Leases
//
// While handlers run, the worker's lease keeper extends all of their leases
// with one store call every HeartbeatInterval, each to LeaseDuration from
// then. A lease is lost when the store refuses to extend it or when it
// ends, by the worker's own reckoning, without a successful extension; its
// handler's context is then cancelled with cause store.ErrLeaseLost and the
// message is not completed by this worker: it is delivered again. A
// handler still running after MaxProcessingTime is cancelled with cause
// ErrMaxProcessingTime and its message failed.
//
// # Goroutines and contexts
//
// A client, once started, runs one goroutine of its own, which runs the
// worker's Run and, when Run returns, stops the loops beside it and
// records how the client ended; beside it run the periodic enqueuer (when
// the client has periodic jobs) and a Watchdog of the claim loops (when
// it has an OnStall callback), which end at the client's Stop or when Run
// returns. Start's context ends nothing: Stop does.
//
// Run moves the worker through its phases, running, draining, hard stop
// and done, forward only. Within Run:
//
//   - each queue's claim loop, on a goroutine of its own, ends when the
//     worker drains. Its receives stop waiting, without cutting a claim
//     short, when the worker drains (messages claimed then are given back
//     uncounted); a hard stop, or the end of Run's context, cuts a claim
//     short, so that a database that does not answer cannot hold up the
//     stop;
//   - each queue's handler goroutines, kept between messages, end once the
//     queue's claim loop has ended and their message is settled. A
//     handler's context is its own, of Run's context without its
//     cancellation: the end of the message's run, a lost lease, a cancelled
//     message, the maximum processing time or a hard stop cancels it, each
//     with its cause;
//   - the completer ends once every claim loop has ended and every handler
//     has handed it its message; its store calls, and the other calls that
//     settle messages, take a context that a hard stop cancels when they
//     outlast HardStopWait;
//   - the lease keeper and the upkeep (maintenance.Maintenance: the
//     maintainer election, the reaper and the cleaner) share a context that
//     ends when Run returns, so that leases are kept through the drain.
//
// What moves the worker: Shutdown, or the end of any claim loop (the
// store closed), starts the drain, and arms ShutdownTimeout, the only
// timer of the drain; the end of Run's context, of Shutdown's, or of
// ShutdownTimeout, or Stop, is a hard stop: running handlers are cancelled
// with cause ErrShutdown, and after HardStopWait the leases of those that
// have not returned are released. Run returns once every handler has
// settled or been abandoned; then the worker is done.
//
// # Upkeep, heartbeats, watchdog
//
// A worker runs a maintenance.Maintenance beside its claim loops, unless
// it has neither a ReapInterval nor a Retention: it stands in the
// database's maintainer election and, while it holds the maintainer lease,
// reaps messages whose lease expired and cleans finished ones. Claim
// loops beat a Heartbeat (Heartbeats) each time they go round, and a
// Watchdog reports loops that have been silent too long.
//
// # Metrics
//
// Through the OpenTelemetry metric API, a no-op unless a provider is
// installed: leasehold.messages.claimed, .completed, .failed,
// .dead_lettered, .snoozed, .cancelled (while their handler ran) and
// .in_flight; leasehold.handler.duration;
// leasehold.lease.extensions by result (ok, lost, error); and
// leasehold.watchdog.stalls (the upkeep's are in package maintenance).
// Message counts and durations carry the attributes queue and, for
// messages that have one, kind; the worker id, new at every restart, is
// in the logs only.
package worker
