package backoff_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/backoff"
)

func TestDelayGrowsAndCaps(t *testing.T) {
	b := backoff.Exponential{Initial: time.Second, Max: 10 * time.Second, Jitter: backoff.NoJitter}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := b.Delay(i); got != w {
			t.Errorf("Delay(%d) = %s, want %s", i, got, w)
		}
	}
	if got := b.Delay(10_000); got != 10*time.Second {
		t.Errorf("Delay(10000) = %s, want the cap", got)
	}
}

func TestJitterUsesInjectedRandom(t *testing.T) {
	b := backoff.Exponential{Initial: 10 * time.Second, Max: time.Minute, Jitter: 0.5}
	b.Rand = func() float64 { return 0 }
	if got := b.Delay(1); got != 10*time.Second {
		t.Errorf("Delay with rand 0 = %s, want 10s", got)
	}
	b.Rand = func() float64 { return 0.5 }
	if got := b.Delay(1); got != 7500*time.Millisecond {
		t.Errorf("Delay with rand 0.5 = %s, want 7.5s", got)
	}
	b.Rand = func() float64 { return 0.999999 }
	if got := b.Delay(1); got <= 5*time.Second || got > 10*time.Second {
		t.Errorf("Delay with rand ~1 = %s, want within (5s, 10s]", got)
	}
}

func TestSleepUsesTheClock(t *testing.T) {
	c := clocktest.New()
	b := backoff.Exponential{Initial: time.Second, Jitter: backoff.NoJitter}
	for attempt := 1; attempt <= 3; attempt++ {
		if err := b.Sleep(context.Background(), c, attempt); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Monotonic(); got != 7*time.Second {
		t.Fatalf("three sleeps took %s of fake time, want 1s+2s+4s", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Sleep(ctx, c, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a cancelled context = %v", err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		b    backoff.Exponential
		want string
	}{
		{backoff.Exponential{Initial: -time.Second}, "Initial"},
		{backoff.Exponential{Initial: time.Minute, Max: time.Second}, "Max"},
		{backoff.Exponential{Multiplier: 0.5}, "Multiplier"},
		{backoff.Exponential{Jitter: 1.5}, "Jitter"},
	}
	for _, c := range cases {
		err := c.b.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", c.b, err, c.want)
		}
	}
	if err := (backoff.Exponential{}).Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}
