package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/internal/sqsapi"
)

func (a *app) serveCommand() *cobra.Command {
	var addr, region, tlsCert, tlsKey string
	var behindProxy bool
	var reapEvery, shutdownTimeout time.Duration
	var maxQueues int
	retainCompleted, retainDead := retention{maintenance.DefaultCompletedRetention}, retention{maintenance.DefaultDeadRetention}
	cmd := &cobra.Command{
		Use:   "serve [--addr HOST:PORT]",
		Short: "Serve the Amazon SQS API, the dashboard, Prometheus metrics and health checks over HTTP",
		Long: `serve speaks the Amazon SQS API (its JSON and query protocols) on one
listener, so that the AWS SDKs and tools of any language send to and
receive from leasehold queues: point the SDK's endpoint URL at
http://HOST:PORT (https:// with TLS). Beside it: the dashboard (open http://HOST:PORT/ in a browser),
GET /metrics (Prometheus), GET /healthz (the process runs) and GET
/readyz (the database commits a write within a second).

A receipt handle is the message's lease: once another receive has taken
the message, the handle gets ReceiptHandleIsInvalid and changes nothing
(on a FIFO queue, also once its visibility timeout has run out).
MessageGroupId orders a FIFO queue's messages, up to ten of a group
received together; on a standard queue it makes groups take turns. A
redrive policy moves a message to its dead-letter queue after
maxReceiveCount receives, as Amazon SQS does; without one, "leasehold
dead redrive" brings a dead message back. docs/sqs.md says what differs.

With LEASEHOLD_ACCESS_KEY_ID and LEASEHOLD_SECRET_ACCESS_KEY set, every
SQS request must carry a valid AWS Signature Version 4 made with them, at
most 15 minutes old; the secret itself never travels. The dashboard and
/metrics have secrets of their own: LEASEHOLD_DASHBOARD_PASSWORD opens
the dashboard through its login page (a session cookie, 12 hours), and
LEASEHOLD_METRICS_TOKEN opens /metrics to "Authorization: Bearer TOKEN".
On a server with credentials, a face without its secret answers 403.
Each secret has at least 16 characters. Without credentials, requests
are not checked, serve listens only on a loopback address, and it
answers only requests for localhost or a loopback address.

Off loopback, serve speaks TLS (--tls-cert and --tls-key; SIGHUP reads
the pair again, and a pair that does not load is logged and the old one
kept) or is told that a proxy in front ends TLS (--behind-tls-proxy);
it refuses plain HTTP otherwise. With either, cookies are Secure and
responses carry Strict-Transport-Security. Without TLS, a SIGHUP
changes nothing.

Receipt handles and dashboard sessions are signed with a secret kept in
the database, the same for every server of it: a handle one server gave
out is good at any other, and a browser may go to any of them.

The server reaps every --reap-interval, so that a message whose visibility
timeout ended can be received again within it; and, while it is the
database's maintainer (one process of all workers and servers is), it
deletes finished messages after --retain-completed and --retain-dead.

SIGTERM or SIGINT stops gracefully: long polls return at once, requests in
flight finish; a second signal stops at once.`,
		Example: `  leasehold serve
  LEASEHOLD_ACCESS_KEY_ID=AKIDEXAMPLE LEASEHOLD_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY leasehold serve --addr 0.0.0.0:9324 --tls-cert cert.pem --tls-key key.pem
  LEASEHOLD_ACCESS_KEY_ID=AKIDEXAMPLE LEASEHOLD_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY LEASEHOLD_DASHBOARD_PASSWORD=correct-horse-battery LEASEHOLD_METRICS_TOKEN=scrape-token-0123456789 leasehold --db postgres://localhost/app serve --addr 0.0.0.0:9324 --behind-tls-proxy
  aws --endpoint-url http://127.0.0.1:9324 sqs create-queue --queue-name jobs`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// SIGHUP is caught from the start: its default action would end
			// a server that is still opening its database or listener.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			cfg := serve.Config{Addr: addr, Region: region, ReapInterval: reapEvery, ShutdownTimeout: shutdownTimeout,
				CompletedRetention: retainCompleted.d, DeadRetention: retainDead.d,
				AccessKeyID: os.Getenv("LEASEHOLD_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("LEASEHOLD_SECRET_ACCESS_KEY"),
				DashboardPassword: os.Getenv("LEASEHOLD_DASHBOARD_PASSWORD"), MetricsToken: os.Getenv("LEASEHOLD_METRICS_TOKEN"),
				TLSCertFile: tlsCert, TLSKeyFile: tlsKey, BehindTLSProxy: behindProxy, Logger: a.log, MaxQueues: maxQueues}
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
			stop := a.onHangup(ctx, hup, s, tlsCert != "")
			defer stop()
			return a.runUntilSignal(ctx, s)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", serve.DefaultAddr, "address to listen on, HOST:PORT; without credentials it must be a loopback address, and off loopback it needs TLS or --behind-tls-proxy")
	fl.StringVar(&tlsCert, "tls-cert", "", "PEM file of the TLS certificate chain to serve HTTPS with (with --tls-key); SIGHUP reads it again")
	fl.StringVar(&tlsKey, "tls-key", "", "PEM file of the TLS certificate's private key (with --tls-cert)")
	fl.BoolVar(&behindProxy, "behind-tls-proxy", false, "a proxy in front ends TLS: serve plain HTTP off loopback, with Secure cookies and Strict-Transport-Security")
	fl.StringVar(&region, "region", sqsapi.DefaultRegion, "region named in queue ARNs for unsigned requests (a signed request's ARNs name the region it was signed for)")
	fl.DurationVar(&reapEvery, "reap-interval", serve.DefaultReapInterval, "how often the reaper gives back messages whose visibility timeout ended")
	fl.DurationVar(&shutdownTimeout, "shutdown-timeout", serve.DefaultShutdownTimeout, "how long a graceful stop waits for requests in flight")
	fl.IntVar(&maxQueues, "max-queues", sqsapi.DefaultMaxQueues, "most queues the database may hold: CreateQueue of a new queue beyond it gets OverLimit")
	fl.Var(&retainCompleted, "retain-completed", "keep completed messages this long after they finish, then delete them (or forever)")
	fl.Var(&retainDead, "retain-dead", "keep dead and cancelled messages this long after they end, then delete them (or forever)")
	return cmd
}

// onHangup answers each SIGHUP that hup gets until ctx ends or stop is
// called: with TLS it reads the server's pair again, and a pair that does
// not load is logged and the server keeps the one it has; without, the
// signal is logged and changes nothing.
func (a *app) onHangup(ctx context.Context, hup <-chan os.Signal, s *serve.Server, tls bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if !tls {
					a.log.Info("SIGHUP: serve has no TLS certificate to reload; nothing changed")
				} else if err := s.ReloadTLS(); err != nil {
					a.log.Error("SIGHUP: the TLS certificate was not reloaded; the old one is served", "error", err)
				} else {
					a.log.Info("SIGHUP: the TLS certificate was reloaded")
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
