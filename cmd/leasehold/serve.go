package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/internal/sqsapi"
)

func (a *app) serveCommand() *cobra.Command {
	var addr, region string
	var reapEvery, shutdownTimeout time.Duration
	var maxQueues int
	retainCompleted, retainDead := retention{maintenance.DefaultCompletedRetention}, retention{maintenance.DefaultDeadRetention}
	cmd := &cobra.Command{
		Use:   "serve [--addr HOST:PORT]",
		Short: "Serve the Amazon SQS API, the dashboard, Prometheus metrics and health checks over HTTP",
		Long: `serve speaks the Amazon SQS API (its JSON protocol) on one listener, so
that the AWS SDKs of any language send to and receive from leasehold
queues: point the SDK's endpoint URL at http://HOST:PORT. Beside it: the
dashboard (open http://HOST:PORT/ in a browser), GET /metrics
(Prometheus), GET /healthz (the process runs) and GET /readyz (the
database answers).

A receipt handle is the message's lease: once its visibility timeout has
run out, or the message was deleted or received again, the handle gets
ReceiptHandleIsInvalid and changes nothing. MessageGroupId
orders messages on any queue, one of a group in flight at a time. A
redrive policy's maxReceiveCount dead-letters a message in its own queue
after that many receives; "leasehold dead redrive" brings it back.

With LEASEHOLD_ACCESS_KEY_ID and LEASEHOLD_SECRET_ACCESS_KEY set, every
SQS request must carry a valid AWS Signature Version 4 made with them, at
most 15 minutes old, and the dashboard and /metrics ask for them by HTTP
basic authentication. Without them, requests are not checked, serve
listens only on a loopback address, and it answers only requests for
localhost or a loopback address.

The server reaps every --reap-interval, so that a message whose visibility
timeout ended can be received again within it; and, while it is the
database's maintainer (one process of all workers and servers is), it
deletes finished messages after --retain-completed and --retain-dead.

SIGTERM or SIGINT stops gracefully: long polls return at once, requests in
flight finish; a second signal stops at once.`,
		Example: `  leasehold serve
  LEASEHOLD_ACCESS_KEY_ID=AKID LEASEHOLD_SECRET_ACCESS_KEY=secret leasehold --db postgres://localhost/app serve --addr 0.0.0.0:9324
  aws --endpoint-url http://127.0.0.1:9324 sqs create-queue --queue-name jobs`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := serve.Config{Addr: addr, Region: region, ReapInterval: reapEvery, ShutdownTimeout: shutdownTimeout,
				CompletedRetention: retainCompleted.d, DeadRetention: retainDead.d,
				AccessKeyID: os.Getenv("LEASEHOLD_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("LEASEHOLD_SECRET_ACCESS_KEY"),
				Logger: a.log, MaxQueues: maxQueues}
			if reapEvery <= 0 || shutdownTimeout <= 0 {
				return usagef("--reap-interval and --shutdown-timeout must be positive")
			}
			if maxQueues <= 0 {
				return usagef("--max-queues must be positive, not %d", maxQueues)
			}
			if err := cfg.Check(); err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			st, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			cfg.Store = st
			s, err := serve.New(cfg)
			if err != nil {
				return usageError{err}
			}
			if err := s.Listen(); err != nil {
				return err
			}
			return a.runUntilSignal(ctx, s)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", serve.DefaultAddr, "address to listen on, HOST:PORT; without credentials it must be a loopback address")
	fl.StringVar(&region, "region", sqsapi.DefaultRegion, "region named in queue ARNs")
	fl.DurationVar(&reapEvery, "reap-interval", serve.DefaultReapInterval, "how often the reaper gives back messages whose visibility timeout ended")
	fl.DurationVar(&shutdownTimeout, "shutdown-timeout", serve.DefaultShutdownTimeout, "how long a graceful stop waits for requests in flight")
	fl.IntVar(&maxQueues, "max-queues", sqsapi.DefaultMaxQueues, "most queues the database may hold: CreateQueue of a new queue beyond it gets OverLimit")
	fl.Var(&retainCompleted, "retain-completed", "keep completed messages this long after they finish, then delete them (or forever)")
	fl.Var(&retainDead, "retain-dead", "keep dead and cancelled messages this long after they end, then delete them (or forever)")
	return cmd
}
