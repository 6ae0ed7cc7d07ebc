package worklease_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/worklease"
)

// refDomain is the reference model of one domain: the spec written out with
// plain maps and a slice, with nothing clever to get wrong.
type refDomain struct {
	lease     *worklease.Lease
	processed map[int64]bool
	failed    map[int64]bool
	backlog   []int64
}

func (d *refDomain) head() (int64, bool) {
	if len(d.backlog) == 0 {
		return 0, false
	}
	return d.backlog[0], true
}

// modelMachine runs random calls against a Leases and the model side by
// side.
type modelMachine struct {
	l          *worklease.Leases
	clk        *clocktest.Clock
	maxRetries int
	domains    map[string]*refDomain
	issued     map[string]bool // every token any Acquired result carried
	stale      []string        // tokens of leases that have ended
}

// knownDomains take part in acquisitions; unknownDomain never does, so
// Succeed and Fail on it always find no lease.
var knownDomains = []string{"a", "b", "c"}

const unknownDomain = "nobody"

func newModelMachine(t *rapid.T) *modelMachine {
	m := &modelMachine{
		clk:        clocktest.New(),
		maxRetries: rapid.IntRange(0, 3).Draw(t, "maxRetries"),
		domains:    map[string]*refDomain{},
		issued:     map[string]bool{},
	}
	n := 0
	l, err := worklease.New(worklease.Config{
		MaxRetries: m.maxRetries,
		Clock:      m.clk,
		// Deliberately short tokens, so that a wrong token may share a
		// prefix with a right one.
		NewToken: func() string { n++; return "t" + strconv.Itoa(n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	m.l = l
	for _, d := range knownDomains {
		m.domains[d] = &refDomain{processed: map[int64]bool{}, failed: map[int64]bool{}}
	}
	return m
}

func (m *modelMachine) drawDomain(t *rapid.T, withUnknown bool) (string, *refDomain) {
	choices := knownDomains
	if withUnknown {
		choices = append(slices.Clone(knownDomains), unknownDomain)
	}
	name := rapid.SampledFrom(choices).Draw(t, "domain")
	return name, m.domains[name] // nil for unknownDomain
}

// drawOffset picks a small offset, often one in a telling position: the
// backlog head, a non-head backlog entry, the leased offset or a terminal
// one.
func (m *modelMachine) drawOffset(t *rapid.T, d *refDomain) int64 {
	candidates := []int64{rapid.Int64Range(0, 9).Draw(t, "anyOffset")}
	candidates = append(candidates, d.backlog...)
	if d.lease != nil {
		candidates = append(candidates, d.lease.Offset)
	}
	for x := range d.processed {
		candidates = append(candidates, x)
		break
	}
	for x := range d.failed {
		candidates = append(candidates, x)
		break
	}
	slices.Sort(candidates) // map order must not leak into the draw
	return rapid.SampledFrom(candidates).Draw(t, "offset")
}

// drawToken picks the right token, a stale one, one never issued, or none.
func (m *modelMachine) drawToken(t *rapid.T, d *refDomain) string {
	candidates := []string{"bogus", ""}
	if d != nil && d.lease != nil {
		candidates = append(candidates, d.lease.Token, d.lease.Token)
	}
	if len(m.stale) > 0 {
		candidates = append(candidates, m.stale[len(m.stale)-1], m.stale[0])
	}
	return rapid.SampledFrom(candidates).Draw(t, "token")
}

func (m *modelMachine) acquire(t *rapid.T) {
	name, d := m.drawDomain(t, false)
	offset := m.drawOffset(t, d)
	got, err := m.l.TryAcquire(name, offset)

	want := worklease.AcquireResult{}
	var wantErr *worklease.BacklogOrderingError
	switch head, queued := d.head(); {
	case d.processed[offset]:
		want.Code = worklease.AlreadyProcessed
	case d.failed[offset]:
		want.Code = worklease.AlreadyFailed
	case d.lease != nil && d.lease.Offset == offset:
		want = worklease.AcquireResult{Code: worklease.AlreadyAcquired, Token: d.lease.Token}
	case d.lease != nil:
		if !slices.Contains(d.backlog, offset) {
			d.backlog = append(d.backlog, offset)
		}
		want.Code = worklease.Enqueued
	case queued && head != offset:
		wantErr = &worklease.BacklogOrderingError{DomainID: name, Expected: head, Got: offset}
	default:
		if queued {
			d.backlog = d.backlog[1:]
		}
		// The token is the implementation's to choose: it must be new.
		if got.Code == worklease.Acquired && (got.Token == "" || m.issued[got.Token]) {
			t.Fatalf("TryAcquire(%q, %d) issued token %q again", name, offset, got.Token)
		}
		m.issued[got.Token] = true
		want = worklease.AcquireResult{Code: worklease.Acquired, Token: got.Token}
		d.lease = &worklease.Lease{Offset: offset, Token: got.Token, AcquiredAt: m.clk.Now()}
	}

	if wantErr != nil {
		var oe *worklease.BacklogOrderingError
		if !errors.As(err, &oe) || !errors.Is(err, worklease.ErrBacklogOrdering) || *oe != *wantErr {
			t.Fatalf("TryAcquire(%q, %d) = %v, %v; want error %+v", name, offset, got, err, *wantErr)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("TryAcquire(%q, %d) = %+v, %v; want %+v", name, offset, got, err, want)
	}
}

// finish checks an error of Succeed or Fail against the model, and reports
// whether the call was expected to succeed.
func (m *modelMachine) finish(t *rapid.T, op, name string, d *refDomain, token string, err error) bool {
	var want error
	switch {
	case d == nil || d.lease == nil:
		want = worklease.ErrLeaseNotFound
	case token != d.lease.Token:
		want = worklease.ErrTokenMismatch
	}
	if want == nil {
		if err != nil {
			t.Fatalf("%s(%q, %q): unexpected error %v", op, name, token, err)
		}
		return true
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s(%q, %q): err = %v, want %v", op, name, token, err, want)
	}
	return false
}

// endLease ends the model's lease and returns the backlog head.
func (m *modelMachine) endLease(d *refDomain) (int64, bool) {
	m.stale = append(m.stale, d.lease.Token)
	d.lease = nil
	return d.head()
}

func (m *modelMachine) succeed(t *rapid.T) {
	name, d := m.drawDomain(t, true)
	token := m.drawToken(t, d)
	got, err := m.l.Succeed(name, token)
	if !m.finish(t, "Succeed", name, d, token, err) {
		return
	}
	d.processed[d.lease.Offset] = true
	want := worklease.SucceedResult{Code: worklease.NoBacklog}
	if next, ok := m.endLease(d); ok {
		want = worklease.SucceedResult{Code: worklease.NextHint, Next: next}
	}
	if got != want {
		t.Fatalf("Succeed(%q, %q) = %+v, want %+v", name, token, got, want)
	}
}

func (m *modelMachine) fail(t *rapid.T) {
	name, d := m.drawDomain(t, true)
	token := m.drawToken(t, d)
	got, err := m.l.Fail(name, token)
	if !m.finish(t, "Fail", name, d, token, err) {
		return
	}
	var want worklease.FailResult
	if d.lease.RetryCount < m.maxRetries {
		d.lease.RetryCount++
		want = worklease.FailResult{Code: worklease.RetryScheduled, RetryCount: d.lease.RetryCount}
	} else {
		d.failed[d.lease.Offset] = true
		want = worklease.FailResult{Code: worklease.GiveUpNoBacklog}
		if next, ok := m.endLease(d); ok {
			want = worklease.FailResult{Code: worklease.GiveUpNextHint, Next: next}
		}
	}
	if got != want {
		t.Fatalf("Fail(%q, %q) = %+v, want %+v", name, token, got, want)
	}
}

func (m *modelMachine) advance(t *rapid.T) {
	m.clk.Advance(time.Duration(rapid.IntRange(1, 5000).Draw(t, "ms")) * time.Millisecond)
}

// check compares the observable state of every domain with the model and
// checks the spec's invariants on the implementation's own state.
func (m *modelMachine) check(t *rapid.T) {
	for _, name := range append(slices.Clone(knownDomains), unknownDomain) {
		d := m.domains[name]
		lease, ok := m.l.Lease(name)
		switch {
		case d == nil || d.lease == nil:
			if ok {
				t.Fatalf("Lease(%q) = %+v, want none", name, lease)
			}
		case !ok || lease != *d.lease:
			t.Fatalf("Lease(%q) = %+v, %v; want %+v", name, lease, ok, *d.lease)
		}
		backlog := m.l.Backlog(name)
		if d == nil {
			if backlog != nil || worklease.Known(m.l, name) {
				t.Fatalf("unknown domain %q exists, backlog %v", name, backlog)
			}
			continue
		}
		if !slices.Equal(backlog, d.backlog) {
			t.Fatalf("Backlog(%q) = %v, want %v", name, backlog, d.backlog)
		}
		// Idempotence and disjointness on the implementation's sets: the
		// terminal sets are exactly the model's, disjoint from each other,
		// from the backlog and from the leased offset.
		processed, failed, _ := worklease.TerminalRanges(m.l, name)
		if got := expand(processed); !slices.Equal(got, keys(d.processed)) {
			t.Fatalf("processed(%q) = %v, want %v", name, got, keys(d.processed))
		}
		if got := expand(failed); !slices.Equal(got, keys(d.failed)) {
			t.Fatalf("failed(%q) = %v, want %v", name, got, keys(d.failed))
		}
		if err := worklease.CheckInternals(m.l, name); err != nil {
			t.Fatalf("domain %q: %v", name, err)
		}
	}
}

func expand(ranges [][2]int64) []int64 {
	var out []int64
	for _, r := range ranges {
		for x := r[0]; x <= r[1]; x++ {
			out = append(out, x)
		}
	}
	return out
}

func keys(set map[int64]bool) []int64 {
	var out []int64
	for x := range set {
		out = append(out, x)
	}
	slices.Sort(out)
	return out
}

// TestModel runs random sequences of TryAcquire, Succeed and Fail on three
// domains (and Succeed and Fail on a fourth that never exists) against the
// reference model, checking every result and error, and the whole
// observable state after every step. The model covers the spec's
// invariants: one lease per domain (Lease), FIFO (Backlog is compared in
// order and drained only by acquiring the head), idempotence and
// disjointness (the terminal sets are compared exactly and checked apart
// from the backlog and the lease), and fencing (wrong, stale and empty
// tokens are tried and must fail without effect).
func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newModelMachine(t)
		t.Repeat(map[string]func(*rapid.T){
			"acquire": m.acquire,
			"succeed": m.succeed,
			"fail":    m.fail,
			"advance": m.advance,
			"":        m.check,
		})
	})
}
