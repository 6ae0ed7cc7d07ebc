package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/metrictest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

type sendEmail struct {
	To string `json:"to"`
}

func (sendEmail) Kind() string { return "send_email" }

type chargeCard struct {
	Cents int `json:"cents"`
}

func (chargeCard) Kind() string { return "charge_card" }

type unhandled struct{}

func (unhandled) Kind() string { return "nobody_handles_this" }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newClient returns a client of a fresh memory store and the store. Call
// inside a synctest bubble.
func newClient(t *testing.T, cfg leasehold.Config) (*leasehold.Client[store.NoTx], store.Store) {
	t.Helper()
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Logger = quiet()
	c, err := leasehold.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Hour)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within an hour of fake time", what)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
	}
}

func count(t *testing.T, st store.Store, queue string) store.Stats {
	t.Helper()
	s, err := st.Stats(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Two kinds on one queue and a third queue, each job run by its kind's
// handler with its args decoded and its options applied.
func TestClientDispatchesByKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{
			"default": {Concurrency: 2}, "billing": {Concurrency: 1}}})
		var mu sync.Mutex
		var got []string
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, job.Queue+":"+job.Kind+":"+job.Args.To+":"+job.Key)
			if job.Attempt != 1 || job.FencingToken <= 0 || job.ID <= 0 {
				t.Errorf("job %+v", job)
			}
			return nil
		})
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[chargeCard]) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, job.Queue+":"+job.Kind)
			return nil
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, &leasehold.EnqueueOptions{Key: "customer-1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, chargeCard{Cents: 5}, &leasehold.EnqueueOptions{Queue: "billing"}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Enqueue(ctx, sendEmail{To: "bob"}, &leasehold.EnqueueOptions{Delay: time.Minute, DedupID: "d"})
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Enqueue(ctx, sendEmail{To: "bob"}, &leasehold.EnqueueOptions{DedupID: "d"})
		if err != nil || !again.Duplicate || again.ID != res.ID {
			t.Fatalf("a duplicate enqueue: %+v, %v; want the first job, %d", again, err, res.ID)
		}
		waitFor(t, "three jobs done", func() bool {
			return count(t, st, "default").Completed == 2 && count(t, st, "billing").Completed == 1
		})
		mu.Lock()
		defer mu.Unlock()
		// The queues run side by side: the order across them is not fixed.
		slices.Sort(got)
		want := "billing:charge_card,default:send_email:ann:customer-1,default:send_email:bob:"
		if strings.Join(got, ",") != want {
			t.Fatalf("ran %q, want %q", strings.Join(got, ","), want)
		}
	})
}

func TestClientHandlerOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}})
		var mu sync.Mutex
		runs := map[string]int{}
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			mu.Lock()
			runs[job.Args.To]++
			n := runs[job.Args.To]
			mu.Unlock()
			switch job.Args.To {
			case "snooze":
				if n <= 3 {
					return leasehold.Snooze(time.Minute)
				}
				return nil
			case "permanent":
				return leasehold.Permanent(errors.New("no such mailbox"))
			}
			return nil
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		var snoozing int64
		for _, to := range []string{"snooze", "permanent"} {
			res, err := c.Enqueue(ctx, sendEmail{To: to}, &leasehold.EnqueueOptions{MaxDeliveries: 1})
			if err != nil {
				t.Fatal(err)
			}
			if to == "snooze" {
				snoozing = res.ID
			}
		}
		// From another program, which works no queues: this client claims
		// the job and cannot run it.
		other := clientOf(t, st, leasehold.Config{})
		if _, err := other.Enqueue(ctx, unhandled{}, &leasehold.EnqueueOptions{MaxDeliveries: 2}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "one job done and two dead", func() bool {
			s := count(t, st, "default")
			return s.Completed == 1 && s.Dead == 2
		})
		dead, err := store.ListDeadLetters(ctx, st, "default", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		reasons := map[string]string{}
		for _, d := range dead {
			reasons[string(d.Reason)] = d.LastError
		}
		if !strings.Contains(reasons["permanent_error"], "no such mailbox") ||
			!strings.Contains(reasons["max_deliveries"], `no handler for jobs of kind "nobody_handles_this"`) {
			t.Fatalf("dead letters %+v", dead)
		}
		mu.Lock()
		defer mu.Unlock()
		if runs["snooze"] != 4 {
			t.Fatalf("a job snoozed 3 times with one delivery ran %d times, want 4", runs["snooze"])
		}
		if row, err := c.JobGet(ctx, snoozing); err != nil || row.Snoozes != 3 || row.Attempt != 1 {
			t.Fatalf("the snoozed job: %+v, %v; want 3 snoozes in its one attempt", row, err)
		}
	})
}

func TestClientStopDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}})
		started := make(chan struct{})
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			close(started)
			time.Sleep(10 * time.Second)
			return nil
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
			t.Fatal(err)
		}
		<-started
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if s := count(t, st, "default"); s.Completed != 1 {
			t.Fatalf("after Stop: %+v, want the running job finished", s)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatalf("a second Stop: %v", err)
		}
	})
}

func TestClientRefusesBadSettings(t *testing.T) {
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		name string
		cfg  leasehold.Config
		want string
	}{
		{"short lease", leasehold.Config{LeaseDuration: 100 * time.Millisecond, Queues: map[string]leasehold.QueueConfig{"q": {}}}, "LeaseDuration is 100ms"},
		{"negative processing time", leasehold.Config{MaxProcessingTime: -time.Second}, "MaxProcessingTime is -1s, must be positive"},
		{"concurrency", leasehold.Config{Queues: map[string]leasehold.QueueConfig{"q": {Concurrency: -1}}}, `queue "q"`},
		{"queue name", leasehold.Config{Queues: map[string]leasehold.QueueConfig{"": {}}}, "Queue"},
		{"heartbeat the lease cannot keep", leasehold.Config{LeaseDuration: 3 * time.Second, HeartbeatInterval: 2 * time.Second}, "HeartbeatInterval 2s does not fit LeaseDuration 3s"},
		{"negative lease", leasehold.Config{LeaseDuration: -time.Second}, "LeaseDuration is -1s, must be at least 1s"},
		{"too many handlers", leasehold.Config{Queues: map[string]leasehold.QueueConfig{"q": {Concurrency: store.MaxBatch + 1}}},
			fmt.Sprintf(`Concurrency of queue "q" is %d, must be 1 to %d`, store.MaxBatch+1, store.MaxBatch)},
		{"reap interval not below the lease", leasehold.Config{LeaseDuration: 10 * time.Second, ReapInterval: 10 * time.Second}, "ReapInterval 10s does not fit LeaseDuration 10s"},
		{"negative reap interval", leasehold.Config{ReapInterval: -time.Second}, "ReapInterval -1s does not fit"},
		{"negative shutdown timeout", leasehold.Config{ShutdownTimeout: -time.Second}, "ShutdownTimeout is -1s, must be positive"},
		{"negative hard stop wait", leasehold.Config{HardStopWait: -time.Second}, "HardStopWait is -1s, must be positive"},
		{"a nil middleware", leasehold.Config{Middleware: []leasehold.Middleware{leasehold.MiddlewareDefaults{}, nil}}, "Middleware[1] is nil"},
	} {
		if _, err := leasehold.NewClient(st, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
		if err := tc.cfg.Validate(); err == nil || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: Validate = %v, want one line", tc.name, err)
		}
	}
	c, err := leasehold.NewClient(st, leasehold.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(context.Background(), sendEmail{}, &leasehold.EnqueueOptions{MaxDeliveries: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a bad option: %v, want ErrInvalid", err)
	}
	leasehold.AddHandler(c, func(context.Context, *leasehold.Job[sendEmail]) error { return nil })
	defer func() {
		if recover() == nil {
			t.Fatal("a second handler for a kind did not panic")
		}
	}()
	leasehold.AddHandler(c, func(context.Context, *leasehold.Job[sendEmail]) error { return nil })
}

type report struct {
	Day string `json:"day"`
}

func (report) Kind() string { return "report" }

func (report) EnqueueOpts() leasehold.EnqueueOptions {
	return leasehold.EnqueueOptions{Queue: "reports", MaxDeliveries: 2, Key: "reports"}
}

// A kind's own options fill what the enqueue leaves out.
func TestKindOptions(t *testing.T) {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := leasehold.NewClient(st, leasehold.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, report{Day: "mon"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, report{Day: "tue"}, &leasehold.EnqueueOptions{MaxDeliveries: 7, Key: "tuesday"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range []store.State{store.Pending, store.Waiting} {
		infos, err := st.List(ctx, store.ListFilter{Queue: "reports", State: s})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			got = append(got, fmt.Sprintf("%s %s %d", in.Payload, in.Key, in.MaxDeliveries))
		}
	}
	slices.Sort(got)
	want := []string{`{"day":"mon"} reports 2`, `{"day":"tue"} tuesday 7`}
	if !slices.Equal(got, want) {
		t.Fatalf("enqueued %q, want %q", got, want)
	}
}

// A client reaps every half lease when its lease is shorter than the 10 s
// default interval.
func TestClientReapsEveryHalfLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		c, _ := newClient(t, leasehold.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			LeaseDuration: 4 * time.Second, Queues: map[string]leasehold.QueueConfig{"default": {}}})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if got := metrictest.Sum(t, metrictest.Collect(t, reader), "leasehold.reaper.runs"); got != 4 {
			t.Fatalf("reaper runs in 9 s on a 4 s lease = %d, want 4 (every 2 s)", got)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// The client reports each queue's depth by state and the age of its oldest
// pending job.
func TestClientQueueGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		c, st := newClient(t, leasehold.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			Queues: map[string]leasehold.QueueConfig{"default": {Concurrency: 1}}})
		release := make(chan struct{})
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			<-release
			return nil
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "one job running", func() bool { return count(t, st, "default").Processing == 1 })
		time.Sleep(3 * time.Second)
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					for _, dp := range d.DataPoints {
						state, _ := dp.Attributes.Value("state")
						got[m.Name+"/"+state.AsString()] = float64(dp.Value)
					}
				case metricdata.Gauge[float64]:
					for _, dp := range d.DataPoints {
						got[m.Name] = dp.Value
					}
				}
			}
		}
		if got["leasehold.queue.depth/pending"] != 1 || got["leasehold.queue.depth/processing"] != 1 ||
			got["leasehold.queue.depth/completed"] != 0 || got["leasehold.queue.oldest_pending_age"] < 3 {
			t.Fatalf("gauges %v", got)
		}
		close(release)
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
