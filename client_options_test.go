package leasehold_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store"
)

// render is a kind with its own limit and retry schedule.
type render struct {
	Page int `json:"page"`
}

func (render) Kind() string { return "render" }

func (render) WorkOpts() leasehold.WorkOptions {
	return leasehold.WorkOptions{MaxProcessingTime: 2 * time.Minute, RetryDelay: func(int) time.Duration { return 7 * time.Second }}
}

func TestKindWorkOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		// The client allows 3 s; render jobs get 2 minutes, and retry 7 s
		// after a failure.
		c, st := newClient(t, leasehold.Config{LeaseDuration: time.Second, MaxProcessingTime: 3 * time.Second,
			Queues: map[string]leasehold.QueueConfig{"default": {}}})
		type run struct {
			at    time.Time
			cause error
		}
		runs := make(chan run, 4)
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[render]) error {
			began := time.Now()
			select {
			case <-time.After(time.Minute):
			case <-ctx.Done():
			}
			runs <- run{began, context.Cause(ctx)}
			if job.Attempt == 1 {
				return errors.New("try again")
			}
			return nil
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Stop(ctx) })
		if _, err := c.Enqueue(ctx, render{Page: 1}, nil); err != nil {
			t.Fatal(err)
		}
		first, second := <-runs, <-runs
		if first.cause != nil || second.cause != nil {
			t.Fatalf("a one-minute run was stopped: %v, %v", first.cause, second.cause)
		}
		if gap := second.at.Sub(first.at); gap != time.Minute+7*time.Second {
			t.Fatalf("second run %s after the first, want the minute it ran and the kind's 7 s", gap)
		}
		waitFor(t, "completion", func() bool { return count(t, st, "default").Completed == 1 })
	})
}

// A kind's maximum processing time may be shorter than the lease: the
// handler is stopped when it ends, and the job fails.
func TestKindMaxProcessingTimeBelowTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st := newClient(t, leasehold.Config{LeaseDuration: 5 * time.Minute, Queues: map[string]leasehold.QueueConfig{"default": {}}})
		stopped := make(chan time.Duration, 1)
		causes := make(chan error, 1)
		leasehold.AddHandler(c, func(ctx context.Context, _ *leasehold.Job[render]) error {
			began := time.Now()
			<-ctx.Done()
			stopped <- time.Since(began)
			causes <- context.Cause(ctx)
			return context.Cause(ctx)
		})
		ctx := context.Background()
		if _, err := c.Enqueue(ctx, render{Page: 1}, &leasehold.EnqueueOptions{MaxDeliveries: 1}); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		if took := <-stopped; took != 2*time.Minute {
			t.Fatalf("the handler was stopped after %s, want the kind's 2m0s", took)
		}
		if cause := <-causes; !errors.Is(cause, leasehold.ErrMaxProcessingTime) {
			t.Fatalf("the handler's context ended with %v, want ErrMaxProcessingTime", cause)
		}
		waitFor(t, "the job dead", func() bool { return count(t, st, "default").Dead == 1 })
	})
}

func TestKindNegativeMaxProcessingTimeIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}})
		leasehold.AddHandler(c, func(context.Context, *leasehold.Job[negativeLimit]) error { return nil })
		err := c.Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), `kind "negative_limit": MaxProcessingTime is -1s, must be positive`) {
			t.Fatalf("Start: %v, want the kind's limit named", err)
		}
	})
}

type negativeLimit struct{}

func (negativeLimit) Kind() string { return "negative_limit" }

func (negativeLimit) WorkOpts() leasehold.WorkOptions {
	return leasehold.WorkOptions{MaxProcessingTime: -time.Second}
}

// upper is a codec that stores JSON upper-cased, to show it is used both
// ways.
type upper struct{}

func (upper) Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return []byte(strings.ToUpper(string(b))), err
}

func (upper) Unmarshal(data []byte, v any) error {
	return json.Unmarshal([]byte(strings.ToLower(string(data))), v)
}

type shout struct {
	Word string `json:"word"`
}

func (shout) Kind() string { return "shout" }

func TestCodecIsUsedBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newClient(t, leasehold.Config{Codec: upper{}, Queues: map[string]leasehold.QueueConfig{"default": {}}})
		got := make(chan string, 1)
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[shout]) error {
			got <- job.Args.Word
			return nil
		})
		res, err := c.Enqueue(ctx, shout{Word: "hi"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		infos, err := st.List(ctx, store.ListFilter{Queue: "default", State: store.Pending, Limit: 1})
		if err != nil || len(infos) != 1 || infos[0].ID != res.ID || string(infos[0].Payload) != `{"WORD":"HI"}` {
			t.Fatalf("stored %+v (%v), want the codec's bytes", infos, err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Stop(ctx) })
		if w := <-got; w != "hi" {
			t.Fatalf("handler got %q, want the codec's decoding", w)
		}
	})
}

func TestStartWithoutQueuesIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, leasehold.Config{})
		if err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "Config.Queues is empty") {
			t.Fatalf("Start: %v, want a refusal naming Config.Queues", err)
		}
	})
}

// A handler past its maximum processing time, by default three leases,
// sees the client's cause.
func TestHandlerSeesMaxProcessingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newClient(t, leasehold.Config{LeaseDuration: 2 * time.Second, Queues: map[string]leasehold.QueueConfig{"default": {}}})
		causes := make(chan error, 1)
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			t0 := time.Now()
			<-ctx.Done()
			if took := time.Since(t0); took != 6*time.Second {
				t.Errorf("cancelled after %s, want three leases, 6 s", took)
			}
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Stop(ctx) })
		if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, &leasehold.EnqueueOptions{MaxDeliveries: 1}); err != nil {
			t.Fatal(err)
		}
		if err := <-causes; !errors.Is(err, leasehold.ErrMaxProcessingTime) {
			t.Fatalf("cause %v, want leasehold.ErrMaxProcessingTime", err)
		}
	})
}
