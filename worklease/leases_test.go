package worklease_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/worklease"
)

// bundle is what most tests need: a Leases on a fake clock with readable,
// predictable tokens.
type bundle struct {
	l   *worklease.Leases
	clk *clocktest.Clock
}

func setup(t testing.TB, maxRetries int) bundle {
	t.Helper()
	clk := clocktest.New()
	var n atomic.Int64
	l, err := worklease.New(worklease.Config{
		MaxRetries: maxRetries,
		Clock:      clk,
		NewToken:   func() string { return "tok-" + strconv.FormatInt(n.Add(1), 10) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return bundle{l: l, clk: clk}
}

func (b bundle) acquire(t testing.TB, domain string, offset int64, want worklease.AcquireCode) worklease.AcquireResult {
	t.Helper()
	r, err := b.l.TryAcquire(domain, offset)
	if err != nil {
		t.Fatalf("TryAcquire(%q, %d): %v", domain, offset, err)
	}
	if r.Code != want {
		t.Fatalf("TryAcquire(%q, %d) = %v, want %v", domain, offset, r.Code, want)
	}
	return r
}

func (b bundle) succeed(t testing.TB, domain, token string, want worklease.SucceedResult) {
	t.Helper()
	s, err := b.l.Succeed(domain, token)
	if err != nil {
		t.Fatalf("Succeed(%q, %q): %v", domain, token, err)
	}
	if s != want {
		t.Fatalf("Succeed(%q, %q) = %+v, want %+v", domain, token, s, want)
	}
}

func (b bundle) fail(t testing.TB, domain, token string, want worklease.FailResult) {
	t.Helper()
	f, err := b.l.Fail(domain, token)
	if err != nil {
		t.Fatalf("Fail(%q, %q): %v", domain, token, err)
	}
	if f != want {
		t.Fatalf("Fail(%q, %q) = %+v, want %+v", domain, token, f, want)
	}
}

func (b bundle) wantState(t testing.TB, domain string, lease *worklease.Lease, backlog ...int64) {
	t.Helper()
	got, ok := b.l.Lease(domain)
	switch {
	case lease == nil && ok:
		t.Fatalf("Lease(%q) = %+v, want none", domain, got)
	case lease != nil && (!ok || got != *lease):
		t.Fatalf("Lease(%q) = %+v, %v, want %+v", domain, got, ok, *lease)
	}
	if gotB := b.l.Backlog(domain); !slices.Equal(gotB, backlog) {
		t.Fatalf("Backlog(%q) = %v, want %v", domain, gotB, backlog)
	}
	if err := worklease.CheckInternals(b.l, domain); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsNegativeMaxRetries(t *testing.T) {
	l, err := worklease.New(worklease.Config{MaxRetries: -2})
	if err == nil || l != nil {
		t.Fatalf("New(MaxRetries: -2) = %v, %v; want an error", l, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "MaxRetries") || !strings.Contains(msg, "-2") {
		t.Fatalf("error %q does not name the field and the value", msg)
	}
}

func TestDefaultTokensAreRandomHex(t *testing.T) {
	l, err := worklease.New(worklease.Config{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for offset := int64(1); offset <= 100; offset++ {
		r, err := l.TryAcquire("d", offset)
		if err != nil || r.Code != worklease.Acquired {
			t.Fatalf("TryAcquire(%d) = %v, %v", offset, r, err)
		}
		if len(r.Token) != 32 || strings.Trim(r.Token, "0123456789abcdef") != "" {
			t.Fatalf("token %q is not 32 lower-case hex digits", r.Token)
		}
		if seen[r.Token] {
			t.Fatalf("token %q issued twice", r.Token)
		}
		seen[r.Token] = true
		lease, _ := l.Lease("d")
		if time.Since(lease.AcquiredAt) > time.Hour || lease.AcquiredAt.Location() != time.UTC {
			t.Fatalf("AcquiredAt %v is not the system clock's UTC now", lease.AcquiredAt)
		}
		if _, err := l.Succeed("d", r.Token); err != nil {
			t.Fatal(err)
		}
	}
}

// Scenario 1 of the spec.
func TestHappyPath(t *testing.T) {
	b := setup(t, 0)
	r := b.acquire(t, "A", 1, worklease.Acquired)
	b.wantState(t, "A", &worklease.Lease{Offset: 1, Token: r.Token, AcquiredAt: b.clk.Now()})
	b.succeed(t, "A", r.Token, worklease.SucceedResult{Code: worklease.NoBacklog})
	b.wantState(t, "A", nil)
}

// Scenario 2 of the spec.
func TestQueueThenOrchestratedHandOff(t *testing.T) {
	b := setup(t, 0)
	r1 := b.acquire(t, "A", 1, worklease.Acquired)
	b.acquire(t, "A", 2, worklease.Enqueued)
	b.wantState(t, "A", &worklease.Lease{Offset: 1, Token: r1.Token, AcquiredAt: b.clk.Now()}, 2)
	b.succeed(t, "A", r1.Token, worklease.SucceedResult{Code: worklease.NextHint, Next: 2})
	b.wantState(t, "A", nil, 2) // the hint does not remove the head
	b.clk.Advance(time.Second)
	r2 := b.acquire(t, "A", 2, worklease.Acquired)
	if r2.Token == r1.Token {
		t.Fatalf("the second lease reuses token %q", r1.Token)
	}
	b.wantState(t, "A", &worklease.Lease{Offset: 2, Token: r2.Token, AcquiredAt: b.clk.Now()})
}

// Scenario 3 of the spec.
func TestOutOfOrderAcquireIsAnError(t *testing.T) {
	b := setup(t, 0)
	r1 := b.acquire(t, "A", 1, worklease.Acquired)
	b.acquire(t, "A", 2, worklease.Enqueued)
	b.acquire(t, "A", 3, worklease.Enqueued)
	b.succeed(t, "A", r1.Token, worklease.SucceedResult{Code: worklease.NextHint, Next: 2})

	_, err := b.l.TryAcquire("A", 3)
	if !errors.Is(err, worklease.ErrBacklogOrdering) {
		t.Fatalf("TryAcquire(A, 3) before 2: err = %v, want ErrBacklogOrdering", err)
	}
	var oe *worklease.BacklogOrderingError
	if !errors.As(err, &oe) {
		t.Fatalf("errors.As(%v) failed", err)
	}
	if *oe != (worklease.BacklogOrderingError{DomainID: "A", Expected: 2, Got: 3}) {
		t.Fatalf("error = %+v, want domain A, expected 2, got 3", *oe)
	}
	if msg := err.Error(); !strings.Contains(msg, `"A"`) || !strings.Contains(msg, "2") || !strings.Contains(msg, "3") {
		t.Fatalf("message %q does not name the domain and the offsets", msg)
	}
	b.wantState(t, "A", nil, 2, 3)
	b.acquire(t, "A", 2, worklease.Acquired)
}

// Scenario 4 of the spec.
func TestRetryKeepsTheLease(t *testing.T) {
	b := setup(t, 2)
	r := b.acquire(t, "A", 1, worklease.Acquired)
	acquiredAt := b.clk.Now()
	b.acquire(t, "A", 2, worklease.Enqueued)
	for n := 1; n <= 2; n++ {
		b.clk.Advance(time.Minute)
		b.fail(t, "A", r.Token, worklease.FailResult{Code: worklease.RetryScheduled, RetryCount: n})
		b.wantState(t, "A", &worklease.Lease{Offset: 1, Token: r.Token, AcquiredAt: acquiredAt, RetryCount: n}, 2)
	}
	again := b.acquire(t, "A", 1, worklease.AlreadyAcquired)
	if again.Token != r.Token {
		t.Fatalf("AlreadyAcquired token %q, want %q", again.Token, r.Token)
	}
}

// Scenario 5 of the spec.
func TestFinalGiveUp(t *testing.T) {
	b := setup(t, 1)
	r := b.acquire(t, "A", 1, worklease.Acquired)
	b.fail(t, "A", r.Token, worklease.FailResult{Code: worklease.RetryScheduled, RetryCount: 1})
	b.fail(t, "A", r.Token, worklease.FailResult{Code: worklease.GiveUpNoBacklog})
	b.wantState(t, "A", nil)
	b.acquire(t, "A", 1, worklease.AlreadyFailed)

	r = b.acquire(t, "A", 2, worklease.Acquired)
	b.acquire(t, "A", 3, worklease.Enqueued)
	b.fail(t, "A", r.Token, worklease.FailResult{Code: worklease.RetryScheduled, RetryCount: 1})
	b.fail(t, "A", r.Token, worklease.FailResult{Code: worklease.GiveUpNextHint, Next: 3})
	b.wantState(t, "A", nil, 3)
	b.acquire(t, "A", 2, worklease.AlreadyFailed)
	processed, failed, _ := worklease.TerminalRanges(b.l, "A")
	if len(processed) != 0 || !reflect.DeepEqual(failed, [][2]int64{{1, 2}}) {
		t.Fatalf("processed %v, failed %v; want none and [[1 2]]", processed, failed)
	}
}

func TestZeroMaxRetriesGivesUpAtOnce(t *testing.T) {
	b := setup(t, 0)
	r := b.acquire(t, "A", 7, worklease.Acquired)
	b.fail(t, "A", r.Token, worklease.FailResult{Code: worklease.GiveUpNoBacklog})
	b.acquire(t, "A", 7, worklease.AlreadyFailed)
}

// Scenario 6 of the spec.
func TestIdempotence(t *testing.T) {
	b := setup(t, 0)
	r := b.acquire(t, "A", 1, worklease.Acquired)
	b.succeed(t, "A", r.Token, worklease.SucceedResult{Code: worklease.NoBacklog})
	r = b.acquire(t, "A", 2, worklease.Acquired)
	b.fail(t, "A", r.Token, worklease.FailResult{Code: worklease.GiveUpNoBacklog})

	// Idle: terminal offsets are turned away and nothing is acquired.
	b.acquire(t, "A", 1, worklease.AlreadyProcessed)
	b.acquire(t, "A", 2, worklease.AlreadyFailed)
	b.wantState(t, "A", nil)
	// Busy: terminal offsets are not enqueued.
	r = b.acquire(t, "A", 3, worklease.Acquired)
	b.acquire(t, "A", 1, worklease.AlreadyProcessed)
	b.acquire(t, "A", 2, worklease.AlreadyFailed)
	b.acquire(t, "A", 4, worklease.Enqueued)
	b.acquire(t, "A", 4, worklease.Enqueued) // no duplicate
	b.wantState(t, "A", &worklease.Lease{Offset: 3, Token: r.Token, AcquiredAt: b.clk.Now()}, 4)
	// Domains are independent.
	b.acquire(t, "B", 1, worklease.Acquired)
}

// TestErrorsChangeNothing provokes every error in every state that allows
// it, and checks that the observable state is what it was.
func TestErrorsChangeNothing(t *testing.T) {
	b := setup(t, 1)
	r := b.acquire(t, "A", 1, worklease.Acquired)
	b.acquire(t, "A", 2, worklease.Enqueued)
	b.acquire(t, "A", 3, worklease.Enqueued)
	b.fail(t, "A", r.Token, worklease.FailResult{Code: worklease.RetryScheduled, RetryCount: 1})
	busy := &worklease.Lease{Offset: 1, Token: r.Token, AcquiredAt: b.clk.Now(), RetryCount: 1}

	type call struct {
		name string
		do   func() error
		want error
	}
	succeed := func(d, tok string) func() error {
		return func() error { _, err := b.l.Succeed(d, tok); return err }
	}
	fail := func(d, tok string) func() error {
		return func() error { _, err := b.l.Fail(d, tok); return err }
	}
	check := func(calls []call, lease *worklease.Lease, backlog ...int64) {
		t.Helper()
		for _, c := range calls {
			pBefore, fBefore, _ := worklease.TerminalRanges(b.l, "A")
			err := c.do()
			if !errors.Is(err, c.want) {
				t.Fatalf("%s: err = %v, want %v", c.name, err, c.want)
			}
			domain := "A"
			if strings.Contains(c.name, "unknown") {
				domain = "nowhere"
				if worklease.Known(b.l, domain) {
					t.Fatalf("%s created the domain", c.name)
				}
			}
			if !strings.Contains(err.Error(), strconv.Quote(domain)) {
				t.Fatalf("%s: message %q does not name the domain", c.name, err)
			}
			b.wantState(t, "A", lease, backlog...)
			pAfter, fAfter, _ := worklease.TerminalRanges(b.l, "A")
			if !reflect.DeepEqual(pBefore, pAfter) || !reflect.DeepEqual(fBefore, fAfter) {
				t.Fatalf("%s changed the terminal sets", c.name)
			}
		}
	}
	check([]call{
		{"succeed with a wrong token", succeed("A", "tok-99"), worklease.ErrTokenMismatch},
		{"fail with a wrong token", fail("A", "tok-99"), worklease.ErrTokenMismatch},
		{"succeed with an empty token", succeed("A", ""), worklease.ErrTokenMismatch},
		{"succeed on an unknown domain", succeed("nowhere", r.Token), worklease.ErrLeaseNotFound},
		{"fail on an unknown domain", fail("nowhere", r.Token), worklease.ErrLeaseNotFound},
	}, busy, 2, 3)

	b.succeed(t, "A", r.Token, worklease.SucceedResult{Code: worklease.NextHint, Next: 2})
	check([]call{
		{"succeed with no lease", succeed("A", r.Token), worklease.ErrLeaseNotFound},
		{"fail with no lease", fail("A", r.Token), worklease.ErrLeaseNotFound},
		{"acquire of a non-head", func() error { _, err := b.l.TryAcquire("A", 3); return err }, worklease.ErrBacklogOrdering},
		{"acquire of a new offset", func() error { _, err := b.l.TryAcquire("A", 9); return err }, worklease.ErrBacklogOrdering},
	}, nil, 2, 3)

	// A stale token: the holder of offset 1 tries to finish offset 2's lease.
	r2 := b.acquire(t, "A", 2, worklease.Acquired)
	check([]call{
		{"succeed with a stale token", succeed("A", r.Token), worklease.ErrTokenMismatch},
		{"fail with a stale token", fail("A", r.Token), worklease.ErrTokenMismatch},
	}, &worklease.Lease{Offset: 2, Token: r2.Token, AcquiredAt: b.clk.Now()}, 3)
}

// TestNoCallbackUnderTheLock checks that NewToken and the clock are called
// with the domain's lock free, by looking at the lock from inside them.
func TestNoCallbackUnderTheLock(t *testing.T) {
	var l *worklease.Leases
	calls := 0
	l, err := worklease.New(worklease.Config{
		NewToken: func() string {
			calls++
			if worklease.Locked(l, "A") {
				t.Error("NewToken called with the domain locked")
			}
			return "tok-" + strconv.Itoa(calls)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.TryAcquire("A", 1)
	if err != nil || r.Code != worklease.Acquired {
		t.Fatalf("TryAcquire = %v, %v", r, err)
	}
	l.TryAcquire("A", 2)
	l.Succeed("A", r.Token)
	if r, err = l.TryAcquire("A", 2); err != nil || r.Code != worklease.Acquired {
		t.Fatalf("TryAcquire = %v, %v", r, err)
	}
	if calls != 2 {
		t.Fatalf("NewToken called %d times for 2 acquisitions", calls)
	}
}

func TestCodeStrings(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{worklease.Acquired.String(), "Acquired"},
		{worklease.AlreadyAcquired.String(), "AlreadyAcquired"},
		{worklease.Enqueued.String(), "Enqueued"},
		{worklease.AlreadyProcessed.String(), "AlreadyProcessed"},
		{worklease.AlreadyFailed.String(), "AlreadyFailed"},
		{worklease.AcquireCode(0).String(), "AcquireCode(0)"},
		{worklease.NoBacklog.String(), "NoBacklog"},
		{worklease.NextHint.String(), "NextHint"},
		{worklease.SucceedCode(9).String(), "SucceedCode(9)"},
		{worklease.RetryScheduled.String(), "RetryScheduled"},
		{worklease.GiveUpNoBacklog.String(), "GiveUpNoBacklog"},
		{worklease.GiveUpNextHint.String(), "GiveUpNextHint"},
		{worklease.FailCode(-1).String(), "FailCode(-1)"},
	} {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
	if s := fmt.Sprint(worklease.Enqueued); s != "Enqueued" {
		t.Errorf("fmt.Sprint(Enqueued) = %q", s)
	}
}
