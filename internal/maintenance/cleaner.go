package maintenance

import (
	"context"
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
	// DefaultCleanInterval is the time between the cleaner's runs.
	DefaultCleanInterval = time.Minute
	// CleanBatch is how many messages one of the cleaner's deletes takes
	// at most: each delete is a short transaction of its own.
	CleanBatch = 5000
)

// CleanerConfig configures a Cleaner.
type CleanerConfig struct {
	// Deps: the Store is cleaned (required); the Logger receives a line
	// per run that deleted messages and per error; the Meter makes
	// leasehold.cleaner.deleted.
	Deps
	// Queue limits the cleaning to one queue. Empty: every queue.
	Queue string
	// CompletedRetention is how long completed messages are kept after
	// they finish. Default DefaultCompletedRetention; KeepForever keeps
	// them. A message is never deleted within the dedup window of its
	// enqueue, so a retention shorter than the window deletes it once the
	// window has passed.
	CompletedRetention time.Duration
	// DeadRetention is how long dead and cancelled messages are kept after
	// they end. Default DefaultDeadRetention; KeepForever keeps them.
	DeadRetention time.Duration
	// Interval is the time between runs. Default DefaultCleanInterval.
	Interval time.Duration
}

func (c CleanerConfig) resolve() (CleanerConfig, error) {
	if c.Store == nil {
		return c, fmt.Errorf("Cleaner: Store is nil")
	}
	c, err := c.resolveRetentions()
	if err != nil {
		return c, err
	}
	if c.Interval < 0 {
		return c, fmt.Errorf("Cleaner: Interval is %s, must not be negative", c.Interval)
	}
	if c.Interval == 0 {
		c.Interval = DefaultCleanInterval
	}
	c.Deps = c.Deps.orDefaults()
	return c, nil
}

// Check reports a retention of c that cannot work, as NewCleaner would.
func (c CleanerConfig) Check() error {
	_, err := c.resolveRetentions()
	return err
}

// resolveRetentions fills in and checks the retentions.
func (c CleanerConfig) resolveRetentions() (CleanerConfig, error) {
	for _, r := range []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{{"CompletedRetention", &c.CompletedRetention, DefaultCompletedRetention}, {"DeadRetention", &c.DeadRetention, DefaultDeadRetention}} {
		switch {
		case *r.d == 0:
			*r.d = r.def
		case *r.d < 0 && *r.d != KeepForever:
			return c, fmt.Errorf("%s is %s: must be positive, or KeepForever", r.name, *r.d)
		}
	}
	return c, nil
}

// Cleaner deletes finished messages past their retention, in batches of
// CleanBatch, so that the messages table does not grow forever. Running
// several at once is safe: each batch takes messages no other holds.
type Cleaner struct {
	cfg     CleanerConfig
	deleted metric.Int64Counter
	states  [store.States]metric.MeasurementOption
}

// NewCleaner returns a cleaner.
func NewCleaner(cfg CleanerConfig) (*Cleaner, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
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
	}{{store.Completed, c.cfg.CompletedRetention, &out.Completed}, {store.Dead, c.cfg.DeadRetention, &out.Dead},
		{store.Cancelled, c.cfg.DeadRetention, &out.Cancelled}} {
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

// loop cleans every Interval until ctx ends, skipping the runs when may
// says no.
func (c *Cleaner) loop(ctx context.Context, may func() bool) {
	Every(ctx, c.cfg.Clock, c.cfg.Interval, nil, func() {
		if may() {
			_, _ = c.RunOnce(ctx)
		}
	})
}
