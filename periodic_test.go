package leasehold_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

type dailyReport struct {
	Name string `json:"name"`
}

func (dailyReport) Kind() string { return "report" }

// clientOn returns a started client on st with the periodic jobs, working
// a queue of its own so that the periodic jobs stay pending to be counted.
func clientOn(t *testing.T, st store.Store, jobs ...*leasehold.PeriodicJob) *leasehold.Client[store.NoTx] {
	t.Helper()
	return clientAt(t, st, nil, jobs...)
}

// clientAt is clientOn with the clock clk; nil: the system clock.
func clientAt(t *testing.T, st store.Store, clk clock.Clock, jobs ...*leasehold.PeriodicJob) *leasehold.Client[store.NoTx] {
	t.Helper()
	c, err := leasehold.NewClient(store.WithoutTx(st), leasehold.Config{Queues: map[string]leasehold.QueueConfig{"work": {}},
		PeriodicJobs: jobs, Clock: clk, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// memoryStore returns a memory store closed when the test ends.
func memoryStore(t *testing.T) *memory.Store {
	t.Helper()
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func hourly() *leasehold.PeriodicJob {
	return leasehold.NewPeriodicJob(leasehold.Every(time.Hour), func() (leasehold.JobArgs, *leasehold.EnqueueOptions) {
		return dailyReport{Name: "hourly"}, &leasehold.EnqueueOptions{Queue: "reports"}
	}, nil)
}

// Each tick is enqueued once however many clients run the job; ticks
// missed while no client ran are not caught up, except the last one when
// a client starts within a minute of it.
func TestPeriodicJobsAcrossClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memoryStore(t)
		pending := func() int64 {
			s, err := st.Stats(ctx, "reports")
			if err != nil {
				t.Fatal(err)
			}
			return s.Pending
		}
		// The bubble starts at midnight: the first tick is due at once.
		clients := []*leasehold.Client[store.NoTx]{clientOn(t, st, hourly()), clientOn(t, st, hourly()), clientOn(t, st, hourly())}
		time.Sleep(3*time.Hour + 30*time.Minute)
		synctest.Wait()
		if got := pending(); got != 4 {
			t.Fatalf("after 3.5 hours with three clients: %d jobs, want 4 (00:00 to 03:00)", got)
		}
		for _, c := range clients {
			if err := c.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// No client from 03:30 to 08:00:30: 04:00 to 07:00 are missed, 08:00
		// comes with the clients that start within the minute after it.
		time.Sleep(4*time.Hour + 30*time.Minute + 30*time.Second)
		late := []*leasehold.Client[store.NoTx]{clientOn(t, st, hourly()), clientOn(t, st, hourly())}
		synctest.Wait()
		if got := pending(); got != 5 {
			t.Fatalf("after clients started at 08:00:30: %d jobs, want 5", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := pending(); got != 6 {
			t.Fatalf("at 09:00:30: %d jobs, want 6", got)
		}
		infos, err := st.List(ctx, store.ListFilter{Queue: "reports", State: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{"00:00", "01:00", "02:00", "03:00", "08:00", "09:00"} {
			if in := infos[i]; in.Kind != "report" || !strings.Contains(in.DedupID, ":") ||
				in.EnqueuedAt.Format("15:04") != want {
				t.Fatalf("job %d: kind %q, dedup id %q, enqueued %s; want a report at %s", i, in.Kind, in.DedupID, in.EnqueuedAt.Format("15:04:05"), want)
			}
		}
		for _, c := range late {
			if err := c.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A cron schedule ticks as its expression says, on the client's clock.
func TestPeriodicCron(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memoryStore(t)
		sched, err := leasehold.Cron("*/20 9-10 * * *")
		if err != nil {
			t.Fatal(err)
		}
		job := leasehold.NewPeriodicJob(sched, func() (leasehold.JobArgs, *leasehold.EnqueueOptions) {
			return dailyReport{Name: "morning"}, &leasehold.EnqueueOptions{Queue: "reports"}
		}, &leasehold.PeriodicJobOpts{ID: "morning-report"})
		c := clientOn(t, st, job)
		defer c.Stop(ctx)
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		s, err := st.Stats(ctx, "reports")
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending != 6 { // 09:00, 09:20, 09:40, 10:00, 10:20, 10:40
			t.Fatalf("a day of */20 9-10: %d jobs, want 6", s.Pending)
		}
	})
}

// Bad periodic jobs are refused, each named.
func TestPeriodicJobsAreChecked(t *testing.T) {
	if _, err := leasehold.Cron("61 * * * *"); err == nil {
		t.Fatal(`Cron("61 * * * *") succeeded`)
	}
	noop := func() (leasehold.JobArgs, *leasehold.EnqueueOptions) { return dailyReport{}, nil }
	err := leasehold.Config{PeriodicJobs: []*leasehold.PeriodicJob{
		leasehold.NewPeriodicJob(leasehold.Every(0), noop, nil),
		leasehold.NewPeriodicJob(nil, noop, nil),
		leasehold.NewPeriodicJob(leasehold.Every(time.Hour), nil, nil),
	}}.Validate()
	for _, want := range []string{"PeriodicJobs[0]: Every(0s)", "PeriodicJobs[1] has no schedule", "PeriodicJobs[2] has no constructor"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate = %v, want it to name %q", err, want)
		}
	}
	st := memoryStore(t)
	c, err := leasehold.NewClient(store.WithoutTx(st), leasehold.Config{Queues: map[string]leasehold.QueueConfig{"work": {}},
		PeriodicJobs: []*leasehold.PeriodicJob{leasehold.NewPeriodicJob(leasehold.Every(time.Hour), noop, nil),
			leasehold.NewPeriodicJob(leasehold.Every(time.Minute), noop, nil)}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), `ID "report" is another periodic job's too`) {
		t.Fatalf("Start with two periodic jobs of one ID: %v", err)
	}
}

// Every counts its periods from the Unix epoch, a Thursday: a weekly
// schedule ticks on Thursdays at midnight UTC, whatever time it is asked
// at; a schedule that never ticks is refused.
func TestEveryCountsFromTheEpoch(t *testing.T) {
	week := leasehold.Every(7 * 24 * time.Hour)
	at := time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC) // a Wednesday
	if got, want := week.Next(at), time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Every(week).Next(%s) = %s, want %s", at, got, want)
	}
	if got, want := leasehold.Every(7*time.Minute).Next(time.Unix(0, 0)), time.Unix(7*60, 0); !got.Equal(want) {
		t.Fatalf("Every(7m).Next(epoch) = %s, want %s", got, want)
	}
	never, err := leasehold.Cron("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	noop := func() (leasehold.JobArgs, *leasehold.EnqueueOptions) { return dailyReport{}, nil }
	err = leasehold.Config{PeriodicJobs: []*leasehold.PeriodicJob{leasehold.NewPeriodicJob(never, noop, nil)}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "never ticks") {
		t.Fatalf("a schedule of February 30: %v, want it refused", err)
	}
}

// "@every 10s" ticks at the multiples of ten seconds since the epoch, so
// two clients started 3 s and 7 s past such a multiple enqueue the same
// ticks, each once between them: the one both catch up at their start
// (00:00:00) and those of the minute after.
func TestCronEveryIsAlignedAcrossClients(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		sched, err := leasehold.Cron("@every 10s")
		if err != nil {
			t.Fatal(err)
		}
		job := func() *leasehold.PeriodicJob {
			return leasehold.NewPeriodicJob(sched, func() (leasehold.JobArgs, *leasehold.EnqueueOptions) {
				return dailyReport{Name: "often"}, &leasehold.EnqueueOptions{Queue: "reports"}
			}, nil)
		}
		clk := clocktest.New() // at midnight, a multiple of ten seconds since the epoch
		// waitTicks waits until the ticks up to n have been enqueued, by
		// one client or the other.
		waitTicks := func(n int64) {
			t.Helper()
			deadline := time.NewTimer(10 * time.Second)
			defer deadline.Stop()
			for {
				woken := st.Wakeup("reports")
				if count(t, st, "reports").Pending >= n {
					return
				}
				select {
				case <-woken:
				case <-deadline.C:
					t.Fatalf("at %s: %d jobs, want %d", clk.Now().Format("15:04:05"), count(t, st, "reports").Pending, n)
				}
			}
		}
		clk.Advance(3 * time.Second)
		a := clientAt(t, st, clk, job())
		waitTicks(1)
		clk.Advance(4 * time.Second)
		b := clientAt(t, st, clk, job())
		for s := 8; s <= 65; s++ {
			clk.Advance(time.Second)
			if s%10 == 0 {
				waitTicks(int64(s/10 + 1))
			}
		}
		for _, c := range []*leasehold.Client[store.NoTx]{a, b} {
			if err := c.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}
		infos, err := st.List(ctx, store.ListFilter{Queue: "reports", State: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		var ticks []string
		for _, in := range infos {
			ticks = append(ticks, in.DedupID)
		}
		want := []string{}
		for s := 0; s <= 60; s += 10 {
			want = append(want, fmt.Sprintf("periodic:report:%d", clocktest.DefaultStart.Add(time.Duration(s)*time.Second).UnixNano()))
		}
		if !slices.Equal(ticks, want) {
			t.Fatalf("enqueued ticks %q, want %q", ticks, want)
		}
	})
}

// A client logs each periodic job's next tick when it starts.
func TestPeriodicNextTickIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memoryStore(t)
		var logs logLines
		c, err := leasehold.NewClient(store.WithoutTx(st), leasehold.Config{PeriodicJobs: []*leasehold.PeriodicJob{hourly()}, Queues: map[string]leasehold.QueueConfig{"work": {}},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		c.Stop(ctx)
		next := time.Now().Truncate(time.Hour).Add(time.Hour).UTC()
		want := fmt.Sprintf(`msg="leasehold: periodic job scheduled" periodic_job=report next_tick=%s`, next.Format("2006-01-02T15:04:05.000Z07:00"))
		logs.mu.Lock()
		defer logs.mu.Unlock()
		if !slices.ContainsFunc(logs.lines, func(l string) bool { return strings.Contains(l, want) }) {
			t.Fatalf("no line %q in:\n%s", want, strings.Join(logs.lines, ""))
		}
	})
}

// Two clients with the same five-field cron job enqueue each tick once
// between them.
func TestPeriodicCronAcrossClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memoryStore(t)
		sched, err := leasehold.Cron("*/5 * * * *")
		if err != nil {
			t.Fatal(err)
		}
		job := func() *leasehold.PeriodicJob {
			return leasehold.NewPeriodicJob(sched, func() (leasehold.JobArgs, *leasehold.EnqueueOptions) {
				return dailyReport{Name: "five"}, &leasehold.EnqueueOptions{Queue: "reports"}
			}, nil)
		}
		a, b := clientOn(t, st, job()), clientOn(t, st, job())
		time.Sleep(time.Hour)
		synctest.Wait()
		for _, c := range []*leasehold.Client[store.NoTx]{a, b} {
			if err := c.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Midnight, when both start, to one o'clock: 13 ticks, each once
		// (26 if each client enqueued its own).
		if s := count(t, st, "reports"); s.Pending != 13 {
			t.Fatalf("an hour of */5 from two clients: %d jobs, want 13", s.Pending)
		}
	})
}
