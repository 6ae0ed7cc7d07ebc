package worklease

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// domain is the record of one domain. It is created once, stored with an
// atomic create-if-absent and never replaced or removed, so its mutex is a
// stable monitor: every read and write of the fields below happens under
// mu. Nothing done under mu calls out of the package or does I/O.
type domain struct {
	mu sync.Mutex
	// leased reports whether lease is active. It is written only under mu;
	// it is atomic so that TryAcquire can read it without mu, as a guess of
	// whether it will need a token.
	leased    atomic.Bool
	lease     Lease // zero when not leased
	processed offsetRanges
	failed    offsetRanges
	backlog   backlog
	// _ makes the record 192 bytes on 64-bit platforms, a size class whose
	// objects start on 64-byte boundaries: two records never share a cache
	// line, so goroutines busy on neighbouring domains do not slow each
	// other down through false sharing.
	_ [24]byte
}

// acquireLocked is TryAcquire under d.mu. When the offset can be acquired
// but minted is false, it changes nothing and returns mint true: the caller
// must make a token and read the clock outside the lock, then call again.
func (d *domain) acquireLocked(domainID string, offset int64, minted bool, token string, now time.Time) (res AcquireResult, mint bool, err error) {
	leased := d.leased.Load()
	switch {
	case d.processed.contains(offset):
		return AcquireResult{Code: AlreadyProcessed}, false, nil
	case d.failed.contains(offset):
		return AcquireResult{Code: AlreadyFailed}, false, nil
	case leased && d.lease.Offset == offset:
		return AcquireResult{Code: AlreadyAcquired, Token: d.lease.Token}, false, nil
	case leased:
		// Terminal offsets were turned away above and the leased one is
		// never queued, so the backlog stays disjoint from both.
		d.backlog.push(offset)
		return AcquireResult{Code: Enqueued}, false, nil
	}
	head, queued := d.backlog.peek()
	if queued && head != offset {
		return AcquireResult{}, false, &BacklogOrderingError{DomainID: domainID, Expected: head, Got: offset}
	}
	if !minted {
		return AcquireResult{}, true, nil
	}
	if queued {
		d.backlog.pop()
	}
	d.lease = Lease{Offset: offset, Token: token, AcquiredAt: now}
	d.leased.Store(true)
	return AcquireResult{Code: Acquired, Token: token}, false, nil
}

// checkTokenLocked returns the error for a Succeed or Fail (op) that may not
// finish the lease, or nil.
func (d *domain) checkTokenLocked(op, domainID, token string) error {
	if !d.leased.Load() {
		return fmt.Errorf("worklease: %s on domain %q: %w", op, domainID, ErrLeaseNotFound)
	}
	if token != d.lease.Token {
		return fmt.Errorf("worklease: %s on domain %q (lease on offset %d): %w",
			op, domainID, d.lease.Offset, ErrTokenMismatch)
	}
	return nil
}

// endLeaseLocked clears the lease and returns the backlog head, if any.
func (d *domain) endLeaseLocked() (next int64, ok bool) {
	d.leased.Store(false)
	d.lease = Lease{}
	return d.backlog.peek()
}
