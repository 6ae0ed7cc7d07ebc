// Package leasehold is lease-based work processing for Go: the package a
// program imports first.
//
// A Client enqueues typed jobs and works queues. A job's args are a Go
// value whose Kind names its type; they are stored as JSON, and the client
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
// Snooze runs it again later without using up a delivery.
//
// Metrics go through the OpenTelemetry API (Config.MeterProvider), a no-op
// unless a provider is installed: every instrument is named leasehold.*
// and carries the queue; besides the workers' counters and histograms, the
// client reports leasehold.queue.depth by queue and state and
// leasehold.queue.oldest_pending_age, read at each collection without
// scanning history.
//
// The store is any store.Store: store/memory for tests, store/sqlite (one
// file, no server) or store/postgres for many processes on many machines.
package leasehold
