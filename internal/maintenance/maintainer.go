package maintenance

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// maintainer holds the database's maintainer lease for a process, so that
// one process at a time does the database's upkeep (its reaper and
// cleaner run only while it holds the lease; the others' skip their
// runs), and another takes over when that process dies, freezes or stops.
// Every process that maintains is a candidate.
type maintainer struct {
	st    store.Store
	id    string
	lease time.Duration // how long one holding lasts unless renewed
	every time.Duration // how often it is taken or renewed
	clk   clock.Clock
	log   *slog.Logger
	// until is the monotonic time at which the holding ends by this
	// process's reckoning (counted from before the call that renewed it);
	// zero when it holds nothing. A process frozen past it finds, when it
	// thaws, that it no longer holds the lease before it does anything.
	until atomic.Int64
	// had and token say whether the last answer of the store gave this
	// process the lease, and under what token; run's goroutine owns them.
	had   bool
	token int64
	held  metric.Int64Gauge
}

func newMaintainer(st store.Store, id string, lease time.Duration, clk clock.Clock, log *slog.Logger, m metric.Meter) (*maintainer, error) {
	held, err := m.Int64Gauge("leasehold.maintainer.held", metric.WithUnit("{lease}"),
		metric.WithDescription("1 while this process holds the database's maintainer lease, 0 otherwise."))
	if err != nil {
		return nil, err
	}
	return &maintainer{st: st, id: id, lease: lease, every: lease / 3, clk: clk, log: log, held: held}, nil
}

// holding reports whether this process holds the lease now.
func (m *maintainer) holding() bool {
	u := m.until.Load()
	return u != 0 && m.clk.Monotonic() < time.Duration(u)
}

// run takes or renews the lease at once and then every third of it, until
// ctx ends; then it gives the lease up, so that another process takes it
// at its next try.
func (m *maintainer) run(ctx context.Context) {
	m.renew(ctx)
	Every(ctx, m.clk, m.every, nil, func() { m.renew(ctx) })
	if m.holding() {
		rctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), m.clk, m.every)
		defer cancel()
		if err := m.st.ReleaseMaintainer(rctx, m.id, m.token); err != nil {
			m.log.Warn("could not give up the maintainer lease; another process takes it when it lapses", "error", err)
		}
		m.until.Store(0)
		m.held.Record(context.WithoutCancel(ctx), 0)
	}
}

// renew takes or renews the lease once. A failed call changes nothing:
// a holding lapses by itself.
func (m *maintainer) renew(ctx context.Context) {
	sent := m.clk.Monotonic()
	res, err := m.st.HoldMaintainer(ctx, m.id, m.lease)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			m.log.Warn("could not take or renew the maintainer lease", "error", err, "holding", m.holding())
		}
		return
	case res.Holder == m.id:
		m.until.Store(int64(sent + m.lease))
		if !m.had || res.Token != m.token {
			m.log.Info("this process maintains the database: it reaps and cleans", "maintainer", m.id, "token", res.Token)
		}
		m.had, m.token = true, res.Token
		m.held.Record(ctx, 1)
	default:
		m.until.Store(0)
		if m.had {
			m.log.Warn("no longer the database's maintainer", "maintainer", res.Holder, "token", res.Token)
		}
		m.had = false
		m.held.Record(ctx, 0)
	}
}
