package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/lifecycle"
)

func TestWaitUntilCountsChecksExactly(t *testing.T) {
	c := clocktest.New()
	checks := 0
	ok, err := lifecycle.WaitUntil(context.Background(), c, 2*time.Second, 500*time.Millisecond, func() bool {
		checks++
		return false
	})
	if err != nil || ok {
		t.Fatalf("WaitUntil = %v, %v; want false, nil", ok, err)
	}
	if checks != 5 {
		t.Fatalf("cond was checked %d times, want 5 (0, 0.5, 1, 1.5, 2 s)", checks)
	}
	if c.Monotonic() != 2*time.Second {
		t.Fatalf("WaitUntil used %s of clock time, want 2s", c.Monotonic())
	}
}

func TestWaitUntilReturnsWhenCondHolds(t *testing.T) {
	c := clocktest.New()
	checks := 0
	ok, err := lifecycle.WaitUntil(context.Background(), c, time.Minute, time.Second, func() bool {
		checks++
		return c.Monotonic() >= 3*time.Second
	})
	if err != nil || !ok {
		t.Fatalf("WaitUntil = %v, %v; want true, nil", ok, err)
	}
	if checks != 4 || c.Monotonic() != 3*time.Second {
		t.Fatalf("%d checks, %s elapsed; want 4 checks and 3s", checks, c.Monotonic())
	}
}

func TestWaitUntilStopsWhenContextEnds(t *testing.T) {
	c := clocktest.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.AfterFunc(1500*time.Millisecond, cancel)
	ok, err := lifecycle.WaitUntil(ctx, c, time.Minute, time.Second, func() bool { return false })
	if ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitUntil = %v, %v; want false, context.Canceled", ok, err)
	}
}

func TestWaitUntilRejectsBadArguments(t *testing.T) {
	c := clocktest.New()
	never := func() bool { t.Fatal("cond called despite bad arguments"); return false }
	if _, err := lifecycle.WaitUntil(context.Background(), c, -time.Second, time.Second, never); err == nil {
		t.Fatal("negative timeout accepted")
	}
	if _, err := lifecycle.WaitUntil(context.Background(), c, time.Second, 0, never); err == nil {
		t.Fatal("zero interval accepted")
	}
}
