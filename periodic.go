package leasehold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/leasehold/leasehold/store"
)

// Schedule says when a periodic job is due.
type Schedule interface {
	// Next returns the first tick strictly after t.
	Next(t time.Time) time.Time
}

// Every returns a schedule that ticks every d, at the multiples of d since
// the Unix epoch (Every(time.Hour) ticks on the hour, UTC), so that every
// client sees the same ticks whenever it started. d must be positive.
func Every(d time.Duration) Schedule { return every{d} }

type every struct{ d time.Duration }

// epoch is where Every counts its periods from.
var epoch = time.Unix(0, 0).UTC()

func (e every) Next(t time.Time) time.Time {
	if e.d <= 0 {
		return time.Time{}
	}
	since := t.Sub(epoch)
	n := since / e.d
	if since < 0 && since%e.d != 0 {
		n-- // the period that holds t began before it
	}
	return epoch.Add((n + 1) * e.d)
}

// Cron parses a standard five-field cron expression (minute, hour, day of
// the month, month, day of the week), or a descriptor such as @hourly or
// @daily. It is read in UTC unless it starts with CRON_TZ=Area/City.
// "@every d" is Every(d), with d cut to whole seconds and at least one:
// it ticks at the multiples of d since the Unix epoch, not every d from
// whenever a client started, so that clients started at different times
// see the same ticks and enqueue each once between them.
func Cron(expr string) (Schedule, error) {
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("leasehold: cron expression %q: %w", expr, err)
	}
	if c, ok := s.(cron.ConstantDelaySchedule); ok {
		return every{c.Delay}, nil
	}
	return s, nil
}

// PeriodicJobOpts are a periodic job's options.
type PeriodicJobOpts struct {
	// ID names the periodic job: clients that run a periodic job of the
	// same ID on one database enqueue each of its ticks once between
	// them. At most 200 bytes. Default: the kind of the job the
	// constructor returns.
	ID string
}

// PeriodicJob is a job enqueued on a schedule; see NewPeriodicJob.
type PeriodicJob struct {
	schedule  Schedule
	construct func() (JobArgs, *EnqueueOptions)
	id        string
}

// NewPeriodicJob returns a job that the client enqueues at every tick of
// schedule: constructor builds its args and options each time (nil
// options: the defaults). Put it in Config.PeriodicJobs.
//
// Every client with the job enqueues each tick, and the tick's dedup id
// (the job's ID and the tick's time; it replaces the options' own) makes
// one of them the only one, however many clients run. Ticks that fall due
// while no client runs are not caught up, with one exception: a client
// that starts less than a minute after a tick enqueues that tick, so that
// a restart across a tick does not lose it. A tick is thus enqueued at
// most once, given a dedup window of at least a minute (the default is
// five). The ticks follow the client's Clock.
func NewPeriodicJob(schedule Schedule, constructor func() (JobArgs, *EnqueueOptions), opts *PeriodicJobOpts) *PeriodicJob {
	p := &PeriodicJob{schedule: schedule, construct: constructor}
	if opts != nil {
		p.id = opts.ID
	}
	return p
}

// periodicCatchUp is how long after a tick a starting client still
// enqueues it.
const periodicCatchUp = time.Minute

// checkPeriodic checks the periodic jobs of a configuration at now.
func checkPeriodic(jobs []*PeriodicJob, now time.Time) error {
	var errs []error
	for i, p := range jobs {
		switch {
		case p == nil:
			errs = append(errs, fmt.Errorf("PeriodicJobs[%d] is nil", i))
		case p.schedule == nil:
			errs = append(errs, fmt.Errorf("PeriodicJobs[%d] has no schedule", i))
		case p.construct == nil:
			errs = append(errs, fmt.Errorf("PeriodicJobs[%d] has no constructor", i))
		case len(p.id) > 200:
			errs = append(errs, fmt.Errorf("PeriodicJobs[%d]: ID is %d bytes, the limit is 200", i, len(p.id)))
		default:
			if e, ok := p.schedule.(every); ok && e.d <= 0 {
				errs = append(errs, fmt.Errorf("PeriodicJobs[%d]: Every(%s): the period must be positive", i, e.d))
			} else if p.schedule.Next(now).IsZero() {
				errs = append(errs, fmt.Errorf("PeriodicJobs[%d]: the schedule never ticks", i))
			}
		}
	}
	return errors.Join(errs...)
}

// scheduled is one periodic job as a running client keeps it.
type scheduled struct {
	job  *PeriodicJob
	id   string
	next time.Time
}

// scheduleJobs names the periodic jobs of the client's configuration; a
// job without an ID is named by its kind, for which its constructor is
// called once. Two jobs of one name are an error.
func (c *Client[TTx]) scheduleJobs() ([]*scheduled, error) {
	jobs := make([]*scheduled, len(c.cfg.PeriodicJobs))
	ids := map[string]bool{}
	for i, p := range c.cfg.PeriodicJobs {
		s := &scheduled{job: p, id: p.id}
		if s.id == "" {
			args, _ := p.construct()
			if args == nil {
				return nil, fmt.Errorf("leasehold: PeriodicJobs[%d]: the constructor returned no args", i)
			}
			s.id = args.Kind()
		}
		if ids[s.id] {
			return nil, fmt.Errorf("leasehold: PeriodicJobs[%d]: ID %q is another periodic job's too; give each its own", i, s.id)
		}
		ids[s.id] = true
		jobs[i] = s
	}
	return jobs, nil
}

// runPeriodic enqueues jobs at their ticks until ctx ends.
func (c *Client[TTx]) runPeriodic(ctx context.Context, jobs []*scheduled) {
	clk := c.cfg.Clock
	now := clk.Now()
	for _, s := range jobs {
		p := s.job
		// The last tick, if it fell due less than periodicCatchUp ago. A
		// zero tick is none: the schedule has ended.
		if t := p.schedule.Next(now.Add(-periodicCatchUp)); !t.IsZero() && !t.After(now) {
			for n := p.schedule.Next(t); !n.IsZero() && !n.After(now); n = p.schedule.Next(n) {
				t = n
			}
			c.enqueueTick(ctx, s, t)
		}
		s.next = p.schedule.Next(now)
		if s.next.IsZero() {
			c.log.Info("leasehold: periodic job has no more ticks", "periodic_job", s.id)
		} else {
			c.log.Info("leasehold: periodic job scheduled", "periodic_job", s.id, "next_tick", s.next)
		}
	}
	for {
		var earliest time.Time
		for _, s := range jobs {
			if !s.next.IsZero() && (earliest.IsZero() || s.next.Before(earliest)) {
				earliest = s.next
			}
		}
		if earliest.IsZero() {
			<-ctx.Done() // no schedule has another tick
			return
		}
		timer := clk.NewTimer(earliest.Sub(clk.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		now := clk.Now()
		for _, s := range jobs {
			if s.next.IsZero() || s.next.After(now) {
				continue
			}
			// Of ticks missed while the client was held up, the last.
			due := s.next
			for n := s.job.schedule.Next(due); !n.IsZero() && !n.After(now); n = s.job.schedule.Next(n) {
				due = n
			}
			c.enqueueTick(ctx, s, due)
			s.next = s.job.schedule.Next(due)
		}
	}
}

// enqueueTick enqueues s's job for the tick at due, under the tick's dedup
// id. A failure is logged: the tick may still come from another client.
func (c *Client[TTx]) enqueueTick(ctx context.Context, s *scheduled, due time.Time) {
	args, opts := s.job.construct()
	o := EnqueueOptions{}
	if opts != nil {
		o = *opts
	}
	o.DedupID = fmt.Sprintf("periodic:%s:%d", s.id, due.UnixNano())
	if args == nil {
		c.log.Error("leasehold: periodic job's constructor returned no args", "periodic_job", s.id, "tick", due)
		return
	}
	res, err := c.Enqueue(ctx, args, &o)
	switch {
	case err != nil && !errors.Is(err, store.ErrClosed):
		c.log.Error("leasehold: could not enqueue a periodic job", "periodic_job", s.id, "tick", due, "error", err)
	case err == nil && !res.Duplicate:
		c.log.Debug("leasehold: periodic job enqueued", "periodic_job", s.id, "tick", due, "id", res.ID)
	}
}
