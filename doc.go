// Package leasehold is lease-based work processing for Go: the package a
// program imports first.
//
// A Client enqueues typed jobs and works queues. A job's args are a Go
// value whose Kind names its type; they are stored as JSON (or through
// another Codec), and the client
// runs each job with the handler registered for its kind (AddHandler), so
// one queue can carry several kinds and one client can work several
// queues.
//
//	type SendEmail struct{ To string `json:"to"` }
//
//	func (SendEmail) Kind() string { return "send_email" }
//
//	c, err := leasehold.NewClient(st, leasehold.Config{
//		Queues: map[string]leasehold.QueueConfig{"default": {Concurrency: 10}},
//	})
//	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[SendEmail]) error {
//		return send(ctx, job.Args.To, job.FencingToken)
//	})
//	err = c.Start(ctx)
//	res, err := c.Enqueue(ctx, SendEmail{To: "ann@example.com"}, nil)
//	...
//	err = c.Stop(ctx)
//
// A job runs under a lease that the client renews while its handler runs;
// when the lease is lost (the process froze, the database was unreachable
// for longer than the lease), the handler's context is cancelled and the
// job runs again elsewhere, and the old delivery can no longer complete
// it. Each delivery carries a fencing token, larger than any earlier
// delivery's of the same job, for the systems a handler writes to. Jobs
// with the same key run one at a time, in enqueue order. A job that fails
// is retried with backoff until its deliveries are used up, then
// dead-lettered with its last error; Permanent dead-letters it at once and
// Snooze runs it again later without using up a delivery. A kind may set
// its own default enqueue options (JobArgsWithOpts) and its own maximum
// processing time and retry schedule (JobArgsWithWorkOpts). HandleAny
// gives a client one raw handler for the jobs of every kind without a
// handler of their own, as they are stored, for a program that hands
// them on, to another language, say. A client refuses to enqueue, on a
// queue it works, a kind it has no handler for (UnknownKindError). At
// Start the
// client logs each queue's lease, heartbeat and maximum processing time,
// and refuses settings that cannot work together.
//
// The queues of one client share one lease keeper (one store call per
// renewal round for every lease held), one completer and one reaper.
//
// EnqueueMany enqueues a batch of jobs in one store call, all or none,
// with results in the batch's order; EnqueueManyTx does so inside the
// program's transaction, as EnqueueTx does for one job.
//
// EnqueueTx enqueues inside the program's own transaction (the
// transactional outbox): Client is generic in the store's transaction
// type, pgx.Tx for store/postgres (*sql.Tx through its SQL view), *sql.Tx
// for store/sqlite, so that passing the wrong kind of transaction does not
// compile. Stop drains and stops; RunUntilSignal is a program's main loop;
// Runnable puts a client in a lifecycle.Group beside the program's own
// loops. Package leaseholdtest helps test handlers and enqueues.
//
// A job may carry metadata (EnqueueOptions.Metadata): a few strings
// stored with it and given to its handler, such as a trace context or a
// tenant. Middleware (Config.Middleware) wrap every enqueue, where they
// may add metadata or refuse the job, and every run of a handler, whose
// context they may derive and whose result they see (OutcomeOf names what
// becomes of the job). Package leaseholdotel is such middleware: it
// traces a job from the request that enqueued it through every run, in
// one OpenTelemetry trace.
//
// Metrics go through the OpenTelemetry API (Config.MeterProvider), a no-op
// unless a provider is installed: every instrument is named leasehold.*;
// those of jobs carry the queue and the kind; besides the workers' counters and histograms, the
// client reports leasehold.queue.depth by queue and state and
// leasehold.queue.oldest_pending_age, read at each collection without
// scanning history.
//
// The store is any store with transactions of its own (store.TxStore): store/memory for tests, store/sqlite (one
// file, no server) or store/postgres for many processes on many machines.
package leasehold
