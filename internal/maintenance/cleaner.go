package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/store"
)

// Retention defaults, and the retention that keeps messages forever.
const (
	DefaultCompletedRetention = 24 * time.Hour
	DefaultDeadRetention      = 7 * 24 * time.Hour
	// KeepForever, as a retention, keeps messages until they are deleted
	// by hand.
	KeepForever time.Duration = -1
	// CleanInterval is the time between the runs of a Maintenance's
	// cleaner.
	CleanInterval = time.Minute
	// CleanBatch is how many messages one of the cleaner's deletes takes
	// at most: each delete is a short transaction of its own.
	CleanBatch = 5000
)

// Retention is how long finished messages are kept before the cleaner
// deletes them: KeepForever keeps them. A message is never deleted within
// the dedup window of its enqueue, so a retention shorter than the window
// deletes it once the window has passed.
type Retention struct {
	// Completed is how long completed messages are kept after they
	// finish.
	Completed time.Duration
	// Dead is how long dead and cancelled messages are kept after they
	// end.
	Dead time.Duration
}

// Check reports each retention of r that is neither positive nor
// KeepForever, by the name of the setting that gives it
// (CompletedRetention, DeadRetention): for the layers that take a
// retention from their users.
func (r Retention) Check() error {
	var errs []error
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"CompletedRetention", r.Completed}, {"DeadRetention", r.Dead}} {
		if f.d <= 0 && f.d != KeepForever {
			errs = append(errs, fmt.Errorf("%s is %s: must be positive, or KeepForever", f.name, f.d))
		}
	}
	return errors.Join(errs...)
}

// CleanerConfig configures a Cleaner.
type CleanerConfig struct {
	// Deps: the Store is cleaned; the Logger receives a line per run that
	// deleted messages and per error; the Meter makes
	// leasehold.cleaner.deleted.
	Deps
	// Queue limits the cleaning to one queue. Empty: every queue.
	Queue string
	// Retention is what the cleaner keeps.
	Retention
}

// Cleaner deletes finished messages past their retention, in batches of
// CleanBatch, so that the messages table does not grow forever. Running
// several at once is safe: each batch takes messages no other holds.
type Cleaner struct {
	cfg     CleanerConfig
	deleted metric.Int64Counter
	states  [store.States]metric.MeasurementOption
}

// NewCleaner returns a cleaner; it fails only when its instrument cannot
// be made.
func NewCleaner(cfg CleanerConfig) (*Cleaner, error) {
	b := &Instruments{Meter: cfg.Meter}
	c := &Cleaner{cfg: cfg, deleted: b.Counter("leasehold.cleaner.deleted", "{message}", "Finished messages the cleaner deleted, by state.")}
	if b.Err != nil {
		return nil, fmt.Errorf("maintenance: cleaner metrics: %w", b.Err)
	}
	for st := range store.State(store.States) {
		c.states[st] = metric.WithAttributes(attribute.String("state", st.String()))
	}
	return c, nil
}

// Cleaned counts what one run deleted, by state.
type Cleaned struct {
	Completed, Dead, Cancelled int
}

// RunOnce deletes every finished message past its retention, batch after
// batch, and returns how many of each state went.
func (c *Cleaner) RunOnce(ctx context.Context) (Cleaned, error) {
	var out Cleaned
	for _, p := range []struct {
		state     store.State
		retention time.Duration
		n         *int
	}{{store.Completed, c.cfg.Completed, &out.Completed}, {store.Dead, c.cfg.Dead, &out.Dead},
		{store.Cancelled, c.cfg.Dead, &out.Cancelled}} {
		if p.retention == KeepForever {
			continue
		}
		for {
			n, err := c.cfg.Store.Prune(ctx, store.Prune{Queue: c.cfg.Queue, State: p.state, OlderThan: p.retention, Limit: CleanBatch})
			*p.n += n
			c.deleted.Add(ctx, int64(n), c.states[p.state])
			if err != nil {
				c.cfg.Logger.Error("cleaner run failed", "error", err)
				return out, err
			}
			if n < CleanBatch {
				break
			}
		}
	}
	if out != (Cleaned{}) {
		c.cfg.Logger.Info("cleaner deleted finished messages", "completed", out.Completed, "dead", out.Dead, "cancelled", out.Cancelled)
	}
	return out, nil
}

// loop cleans every CleanInterval until ctx ends, skipping the runs when may
// says no.
func (c *Cleaner) loop(ctx context.Context, may func() bool) {
	Every(ctx, c.cfg.Clock, CleanInterval, nil, func() {
		if may() {
			_, _ = c.RunOnce(ctx)
		}
	})
}
