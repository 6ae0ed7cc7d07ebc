package clocktest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
)

// received returns the value waiting on ch, failing the test if there is none.
func received(t *testing.T, ch <-chan time.Time) time.Time {
	t.Helper()
	select {
	case v := <-ch:
		return v
	default:
		t.Fatal("no value on the channel")
		return time.Time{}
	}
}

func empty(t *testing.T, ch <-chan time.Time) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected value %s on the channel", v)
	default:
	}
}

func TestAdvanceFiresInTimeOrder(t *testing.T) {
	c := clocktest.New()
	start := c.Now()
	var mu sync.Mutex
	var order []string
	record := func(name string) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name+"@"+c.Now().Sub(start).String())
		}
	}
	c.AfterFunc(3*time.Second, record("c"))
	c.AfterFunc(1*time.Second, record("a"))
	c.AfterFunc(2*time.Second, record("b"))
	c.AfterFunc(2*time.Second, record("b2")) // same deadline: creation order
	c.AfterFunc(10*time.Second, record("late"))

	c.Advance(5 * time.Second)
	want := []string{"a@1s", "b@2s", "b2@2s", "c@3s"}
	if len(order) != len(want) {
		t.Fatalf("fired %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("fired %v, want %v", order, want)
		}
	}
	if got := c.Now().Sub(start); got != 5*time.Second {
		t.Fatalf("clock advanced %s, want 5s", got)
	}
	if got := c.Waiters(); got != 1 {
		t.Fatalf("Waiters = %d, want 1 (the late callback)", got)
	}
}

func TestTimerDeliversItsDueTime(t *testing.T) {
	c := clocktest.New()
	start := c.Now()
	tm := c.NewTimer(2 * time.Second)
	c.Advance(time.Second)
	empty(t, tm.C())
	c.Advance(5 * time.Second)
	if got := received(t, tm.C()); !got.Equal(start.Add(2 * time.Second)) {
		t.Fatalf("timer delivered %s, want start+2s", got)
	}
	c.Advance(time.Hour)
	empty(t, tm.C())
}

func TestTickerTicksAndDropsForSlowReceiver(t *testing.T) {
	c := clocktest.New()
	start := c.Now()
	tk := c.NewTicker(time.Second)
	c.Advance(time.Second)
	if got := received(t, tk.C()); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("first tick %s, want start+1s", got)
	}
	// Three ticks come due while nobody receives: one is kept, as with
	// time.Ticker, and it is the first.
	c.Advance(3 * time.Second)
	if got := received(t, tk.C()); !got.Equal(start.Add(2 * time.Second)) {
		t.Fatalf("kept tick %s, want start+2s", got)
	}
	empty(t, tk.C())

	tk.Reset(10 * time.Second)
	c.Advance(9 * time.Second)
	empty(t, tk.C())
	c.Advance(time.Second)
	received(t, tk.C())

	tk.Stop()
	c.Advance(time.Minute)
	empty(t, tk.C())
	if c.Waiters() != 0 {
		t.Fatalf("Waiters = %d after Stop, want 0", c.Waiters())
	}
}

func TestTickerPanicsOnNonPositiveInterval(t *testing.T) {
	c := clocktest.New()
	defer func() {
		if recover() == nil {
			t.Fatal("NewTicker(0) did not panic")
		}
	}()
	c.NewTicker(0)
}

func TestStopAndResetSemantics(t *testing.T) {
	c := clocktest.New()

	tm := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}
	c.Advance(2 * time.Second)
	empty(t, tm.C())

	// Fired but not received: as since Go 1.23, Stop reports true and the
	// stale value is gone.
	tm.Reset(time.Second)
	c.Advance(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a fired, unreceived timer returned false")
	}
	empty(t, tm.C())

	// Fired and received: Stop reports false.
	tm.Reset(time.Second)
	c.Advance(time.Second)
	received(t, tm.C())
	if tm.Stop() {
		t.Fatal("Stop after the value was received returned true")
	}

	// Reset of a fired, unreceived timer drops the stale value and
	// reschedules.
	tm.Reset(time.Second)
	c.Advance(time.Second)
	if !tm.Reset(3 * time.Second) {
		t.Fatal("Reset of a fired, unreceived timer returned false")
	}
	empty(t, tm.C())
	c.Advance(2 * time.Second)
	empty(t, tm.C())
	c.Advance(time.Second)
	received(t, tm.C())

	// A non-positive duration is due at once.
	tm.Reset(0)
	received(t, tm.C())

	// AfterFunc stopped before it fires never runs.
	ran := false
	af := c.AfterFunc(time.Second, func() { ran = true })
	if !af.Stop() {
		t.Fatal("Stop of a pending AfterFunc returned false")
	}
	c.Advance(time.Minute)
	if ran {
		t.Fatal("stopped AfterFunc ran")
	}
	if af.Reset(time.Second) {
		t.Fatal("Reset of a stopped AfterFunc returned true")
	}
	c.Advance(time.Second)
	if !ran {
		t.Fatal("reset AfterFunc did not run")
	}
}

func TestAfterFuncWithNonPositiveDurationRunsAtOnce(t *testing.T) {
	c := clocktest.New()
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) })
	<-done // runs in its own goroutine without any Advance
}

func TestSetWallLeavesMonotonicAndTimersAlone(t *testing.T) {
	c := clocktest.New()
	tm := c.NewTimer(time.Minute)
	mono := c.Monotonic()

	jump := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	if err := c.SetWall(jump); err != nil {
		t.Fatal(err)
	}
	if !c.Now().Equal(jump) {
		t.Fatalf("Now = %s, want %s", c.Now(), jump)
	}
	if c.Monotonic() != mono {
		t.Fatalf("monotonic moved on a wall jump: %s -> %s", mono, c.Monotonic())
	}
	empty(t, tm.C())

	// Backwards too.
	back := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := c.SetWall(back); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if got := received(t, tm.C()); !got.Equal(back.Add(time.Minute)) {
		t.Fatalf("timer delivered %s, want %s", got, back.Add(time.Minute))
	}
	if c.Monotonic() != mono+time.Minute {
		t.Fatalf("monotonic = %s, want %s", c.Monotonic(), mono+time.Minute)
	}
}

func TestSetWallRejectsNonUTC(t *testing.T) {
	c := clocktest.New()
	before := c.Now()
	paris := time.FixedZone("CET", 3600)
	err := c.SetWall(time.Date(2030, 1, 1, 0, 0, 0, 0, paris))
	if err == nil {
		t.Fatal("SetWall accepted a non-UTC time")
	}
	if !c.Now().Equal(before) {
		t.Fatal("a rejected SetWall changed the clock")
	}
}

func TestAdvanceRejectsNegative(t *testing.T) {
	c := clocktest.New()
	defer func() {
		if recover() == nil {
			t.Fatal("Advance(-1s) did not panic")
		}
	}()
	c.Advance(-time.Second)
}

func TestSleepAdvancesAndHonoursContext(t *testing.T) {
	c := clocktest.New()
	if err := c.Sleep(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if c.Monotonic() != 10*time.Second {
		t.Fatalf("Sleep advanced to %s, want 10s", c.Monotonic())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a cancelled context = %v, want context.Canceled", err)
	}
	if c.Monotonic() != 10*time.Second {
		t.Fatal("Sleep with a cancelled context advanced the clock")
	}

	// A timer that cancels the context during the sleep stops the sleep at
	// that moment.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	c.AfterFunc(3*time.Second, cancel)
	if err := c.Sleep(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if c.Monotonic() != 13*time.Second {
		t.Fatalf("Sleep stopped at %s, want 13s", c.Monotonic())
	}
}

func TestBlockUntilWaitsForGoroutineToSetItsTimer(t *testing.T) {
	c := clocktest.New()
	ticks := make(chan time.Duration)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := 0; i < 3; i++ {
			tm := c.NewTimer(time.Second)
			select {
			case <-tm.C():
				ticks <- c.Monotonic()
			case <-ctx.Done():
				return
			}
		}
	}()
	for i := 1; i <= 3; i++ {
		if err := c.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
		if got := <-ticks; got != time.Duration(i)*time.Second {
			t.Fatalf("iteration %d woke at %s", i, got)
		}
	}

	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if err := c.BlockUntil(short, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("BlockUntil with no waiter and a cancelled context = %v", err)
	}
}

func TestConcurrentUseIsRaceFree(t *testing.T) {
	c := clocktest.New()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := c.Monotonic()
			for i := 0; i < 500; i++ {
				c.Advance(time.Millisecond)
				tm := c.NewTimer(time.Millisecond)
				tm.Reset(2 * time.Millisecond)
				tm.Stop()
				_ = c.Now()
				m := c.Monotonic()
				if m < prev {
					t.Errorf("monotonic went back: %s -> %s", prev, m)
					return
				}
				prev = m
			}
		}()
	}
	wg.Wait()
	if c.Monotonic() != 2*time.Second {
		t.Fatalf("monotonic = %s after 2000 advances of 1ms, want 2s", c.Monotonic())
	}
}
