// Package worker turns a store into reliable processing: the worker loop,
// the lease keeper, the reaper, heartbeats and the watchdog.
//
// # The worker loop
//
// A Worker claims messages of one queue or of several (Queues), for each
// at most as many as that queue has free handler slots (Concurrency,
// default 10), long-polling when the queue is empty and claiming nothing
// while its slots are full or Saturated says downstream is. The queues of
// one worker share its lease keeper, its completer and its reaper. A kind
// of message may have a maximum processing time and a retry delay of its
// own (Kinds). Handlers run on goroutines the worker keeps, one message at a
// time each:
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
// with one store call per tick (LeaseExtenderConfig). A lease is lost when
// the store refuses to extend it or when it ends, by the worker's own
// reckoning, without a successful extension; its handler's context is then
// cancelled with cause store.ErrLeaseLost and the message is not completed by
// this worker: it is delivered again. A handler still running after
// MaxProcessingTime is cancelled with cause ErrMaxProcessingTime and its
// message failed. KeepAlive gives the same protection to a message received
// through the mailbox by a loop that is not a Worker.
//
// # Upkeep, heartbeats, watchdog
//
// Every worker runs a maintenance.Maintenance beside its claim loops: it
// stands in the database's maintainer election and, while it holds the
// maintainer lease, reaps messages whose lease expired and cleans
// finished ones (DisableReaper, DisableCleaner). Loops beat a Heartbeat
// as they make progress, and a Watchdog reports loops that have been
// silent too long.
//
// # Metrics
//
// Through the OpenTelemetry metric API, a no-op unless a provider is
// installed: leasehold.messages.claimed, .completed, .failed,
// .dead_lettered and .in_flight; leasehold.handler.duration;
// leasehold.lease.extensions by result (ok, lost, error); and
// leasehold.watchdog.stalls (the upkeep's are in package maintenance). Message
// counts and durations carry the attributes queue and, for messages that
// have one, kind; the worker id, new at every restart, is in the logs
// only.
package worker
