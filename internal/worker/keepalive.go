package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/store"
)

// KeepAliveConfig configures KeepAlive.
type KeepAliveConfig struct {
	// LeaseExtenderConfig says how often to extend and by how much.
	// Extension is required when Enabled; Interval defaults to a third of
	// it. DefaultLeaseExtenderConfig gives long-running defaults.
	LeaseExtenderConfig
	// Clock times the extensions; it must be the clock of the mailbox the
	// message came from, which is the default.
	Clock clock.Clock
	// Logger receives lease warnings. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider gets leasehold.lease.extensions. Default: the global
	// OpenTelemetry provider.
	MeterProvider metric.MeterProvider
}

// KeepAlive runs fn while keeping msg's lease alive, for programs with a
// receive loop of their own: the lease is extended for exactly as long as
// fn runs.
//
//	err := worker.KeepAlive(ctx, msg, cfg, func(ctx context.Context) error {
//		return process(ctx, msg.Body())
//	})
//	if err == nil {
//		err = msg.Ack(ctx)
//	}
//
// The lease is extended every Interval to Extension from then. When it is
// lost (the store refuses an extension, or the lease ends without one: the
// first extension comes after Interval, so receive with a visibility longer
// than that) fn's context is cancelled with cause store.ErrLeaseLost, and
// KeepAlive returns an error wrapping store.ErrLeaseLost, joined with fn's: do not
// acknowledge the message then. Extension has stopped when KeepAlive
// returns; msg's LeaseExpires and LeaseDeadline still tell the lease it was
// received with.
func KeepAlive(ctx context.Context, msg *mailbox.Message, cfg KeepAliveConfig, fn func(ctx context.Context) error) error {
	if msg.Mailbox() == nil {
		return errors.New("worker: KeepAlive: the message was not received from a mailbox")
	}
	if cfg.Enabled && cfg.Extension == 0 {
		return errors.New("worker: KeepAlive: Extension is required when Enabled")
	}
	ext, err := cfg.LeaseExtenderConfig.resolve(cfg.Extension)
	if err != nil {
		return fmt.Errorf("worker: KeepAlive: %w", err)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = msg.Mailbox().Clock()
	}
	log := orDefaultLogger(cfg.Logger).With("queue", msg.Queue)
	m, err := newWorkerMetrics(maintenance.Meter(cfg.MeterProvider))
	if err != nil {
		return fmt.Errorf("worker: KeepAlive: metrics: %w", err)
	}
	k := newKeeper(msg.Mailbox().Store(), clk, ext, log, m)
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h := k.hold(msg.Lease, "", msg.LeaseDeadline(), cancel) // the logger names the queue
	keeperCtx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { k.run(keeperCtx) })
	err = fn(fnCtx)
	stopKeeper()
	wg.Wait()
	if lost, _ := k.drop(h); lost {
		return errors.Join(fmt.Errorf("worker: %w", store.LeaseLost(msg.Lease)), err)
	}
	return err
}
