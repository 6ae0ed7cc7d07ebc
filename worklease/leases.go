package worklease

import (
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// Config configures Leases. The zero value is valid: no retries, the system
// clock and random tokens.
type Config struct {
	// MaxRetries is the number of failures of an offset that are retried:
	// Fail gives up on the offset when its lease's RetryCount is already
	// MaxRetries or more. 0, the default, makes the first Fail give up. It
	// must not be negative.
	MaxRetries int
	// Clock sets Lease.AcquiredAt. Nil means the system clock.
	Clock clock.Clock
	// NewToken makes the fencing token of each new lease. It must be safe
	// for concurrent use, and it must not return a token that an earlier
	// lease of the same domain had, or a stale holder could finish a later
	// lease. It is never called with a lock held. TryAcquire on a domain
	// that looks idle calls it before it knows whether it will acquire, and
	// drops a token it does not use. Nil means 128 random bits from
	// crypto/rand, as 32 lower-case hex digits.
	NewToken func() string
}

// Leases holds the leases, backlogs and terminal offsets of any number of
// domains. It is safe for concurrent use. Calls on one domain are
// serialized; calls on different domains share no lock. Domains are created
// by their first TryAcquire and live as long as the Leases.
type Leases struct {
	maxRetries int
	clk        clock.Clock
	newToken   func() string
	domains    sync.Map // domain ID (string) -> *domain, never replaced
}

// New returns an empty Leases. It rejects a negative MaxRetries.
func New(cfg Config) (*Leases, error) {
	if cfg.MaxRetries < 0 {
		return nil, fmt.Errorf("worklease: MaxRetries is %d, must not be negative", cfg.MaxRetries)
	}
	l := &Leases{
		maxRetries: cfg.MaxRetries,
		clk:        clock.OrSystem(cfg.Clock),
		newToken:   cfg.NewToken,
	}
	if l.newToken == nil {
		l.newToken = randomToken
	}
	return l, nil
}

// lookup returns the record of an existing domain.
func (l *Leases) lookup(domainID string) (*domain, bool) {
	d, ok := l.domains.Load(domainID)
	if !ok {
		return nil, false
	}
	return d.(*domain), true
}

// domain returns the record of domainID, creating it if need be. Racing
// creators agree on one record: LoadOrStore keeps the first.
func (l *Leases) domain(domainID string) *domain {
	if d, ok := l.lookup(domainID); ok {
		return d
	}
	d, _ := l.domains.LoadOrStore(domainID, new(domain))
	return d.(*domain)
}

// TryAcquire asks for the lease on offset in domainID, in this order:
//
//   - an offset that succeeded before returns AlreadyProcessed, and one
//     given up on returns AlreadyFailed; nothing changes;
//   - the offset in flight returns AlreadyAcquired with the lease's token;
//   - while another offset is in flight, the offset joins the tail of the
//     backlog, unless it is already queued, and Enqueued is returned;
//   - with no lease, the offset is acquired if the backlog is empty or the
//     offset is its head (which is then removed from the backlog): the
//     result is Acquired with a new token. Any other offset is a caller bug:
//     the error is a *BacklogOrderingError naming the head, and nothing
//     changes.
//
// TryAcquire never hands work to anyone: the caller that gets Acquired owns
// the offset until it calls Succeed, or Fail gives up.
func (l *Leases) TryAcquire(domainID string, offset int64) (AcquireResult, error) {
	d := l.domain(domainID)
	// The token and the time are made outside the lock: NewToken is the
	// caller's code, crypto/rand may make a system call, and a fake clock has a lock
	// of its own. They are made up front when the domain looks idle, the
	// case in which an acquisition is likely, so that the common path takes
	// the lock once; if the domain turns out to need none, the token goes
	// unused. When the domain looked busy but has become acquirable, the
	// first pass changes nothing and asks for a token, and the second pass
	// decides again on the state it then finds.
	var (
		token  string
		now    time.Time
		minted bool
	)
	if !d.leased.Load() {
		token, now, minted = l.newToken(), l.clk.Now(), true
	}
	for {
		d.mu.Lock()
		res, mint, err := d.acquireLocked(domainID, offset, minted, token, now)
		d.mu.Unlock()
		if !mint {
			return res, err
		}
		token, now, minted = l.newToken(), l.clk.Now(), true
	}
}

// Succeed ends the lease of domainID that token fences: the offset becomes
// processed and the lease is cleared. The backlog is left alone: the result
// is NextHint with its head, which the orchestrator should acquire next, or
// NoBacklog. With no active lease the error wraps ErrLeaseNotFound; with
// another token it wraps ErrTokenMismatch; either way nothing changes.
func (l *Leases) Succeed(domainID, token string) (SucceedResult, error) {
	d, ok := l.lookup(domainID)
	if !ok {
		return SucceedResult{}, fmt.Errorf("worklease: succeed on domain %q: %w", domainID, ErrLeaseNotFound)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkTokenLocked("succeed", domainID, token); err != nil {
		return SucceedResult{}, err
	}
	d.processed.add(d.lease.Offset)
	if next, ok := d.endLeaseLocked(); ok {
		return SucceedResult{Code: NextHint, Next: next}, nil
	}
	return SucceedResult{Code: NoBacklog}, nil
}

// Fail records a failed attempt on the lease of domainID that token fences.
// While the lease's RetryCount is below Config.MaxRetries, the lease is
// kept, on the same offset with the same token and AcquiredAt, its
// RetryCount is increased, and the result is RetryScheduled: when to try
// again is the orchestrator's decision. Otherwise the offset is failed for
// good, the lease is cleared and the result is GiveUpNextHint with the
// backlog head, or GiveUpNoBacklog. Errors are as for Succeed.
func (l *Leases) Fail(domainID, token string) (FailResult, error) {
	d, ok := l.lookup(domainID)
	if !ok {
		return FailResult{}, fmt.Errorf("worklease: fail on domain %q: %w", domainID, ErrLeaseNotFound)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkTokenLocked("fail", domainID, token); err != nil {
		return FailResult{}, err
	}
	if d.lease.RetryCount < l.maxRetries {
		d.lease.RetryCount++
		return FailResult{Code: RetryScheduled, RetryCount: d.lease.RetryCount}, nil
	}
	d.failed.add(d.lease.Offset)
	if next, ok := d.endLeaseLocked(); ok {
		return FailResult{Code: GiveUpNextHint, Next: next}, nil
	}
	return FailResult{Code: GiveUpNoBacklog}, nil
}

// Lease returns the active lease of domainID, and false when the domain is
// idle or unknown.
func (l *Leases) Lease(domainID string) (Lease, bool) {
	d, ok := l.lookup(domainID)
	if !ok {
		return Lease{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lease, d.leased.Load()
}

// Backlog returns a copy of the backlog of domainID, head first; nil when it
// is empty or the domain unknown.
func (l *Leases) Backlog(domainID string) []int64 {
	d, ok := l.lookup(domainID)
	if !ok {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.backlog.snapshot()
}
