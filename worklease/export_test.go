package worklease

import (
	"fmt"
	"slices"
)

// TerminalRanges returns the processed and failed offsets of domainID as
// closed ranges [lo, hi], and the bytes their slices hold.
func TerminalRanges(l *Leases, domainID string) (processed, failed [][2]int64, bytes int) {
	d, ok := l.lookup(domainID)
	if !ok {
		return nil, nil, 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	conv := func(s offsetRanges) [][2]int64 {
		var out [][2]int64
		for _, r := range s.r {
			out = append(out, [2]int64{r.lo, r.hi})
		}
		return out
	}
	const rangeSize = 16
	return conv(d.processed), conv(d.failed), rangeSize * (cap(d.processed.r) + cap(d.failed.r))
}

// Known reports whether domainID has a record.
func Known(l *Leases, domainID string) bool {
	_, ok := l.lookup(domainID)
	return ok
}

// Locked reports whether the lock of domainID is held by anyone.
func Locked(l *Leases, domainID string) bool {
	d, ok := l.lookup(domainID)
	if !ok {
		return false
	}
	if d.mu.TryLock() {
		d.mu.Unlock()
		return false
	}
	return true
}

// CheckInternals checks the representation invariants of domainID: the
// ranges sorted, disjoint and not adjacent; the backlog's ring and set in
// agreement; the lease zero when not leased; and the spec's disjointness.
func CheckInternals(l *Leases, domainID string) error {
	d, ok := l.lookup(domainID)
	if !ok {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range []struct {
		name string
		set  offsetRanges
	}{{"processed", d.processed}, {"failed", d.failed}} {
		for i, r := range s.set.r {
			if r.lo > r.hi {
				return fmt.Errorf("%s range %d is [%d, %d]", s.name, i, r.lo, r.hi)
			}
			if i > 0 && s.set.r[i-1].hi+1 >= r.lo {
				return fmt.Errorf("%s ranges %d and %d overlap or touch: %v", s.name, i-1, i, s.set.r)
			}
		}
	}
	for _, r := range d.processed.r {
		for x := r.lo; x <= r.hi; x++ {
			if d.failed.contains(x) {
				return fmt.Errorf("offset %d is both processed and failed", x)
			}
			if x-r.lo > 1000 {
				break // enough for the small offsets of the model tests
			}
		}
	}
	items := d.backlog.snapshot()
	if len(items) != d.backlog.len() || len(d.backlog.set) != len(items) {
		return fmt.Errorf("backlog ring holds %d, count %d, set %d", len(items), d.backlog.len(), len(d.backlog.set))
	}
	for i, x := range items {
		if !d.backlog.contains(x) {
			return fmt.Errorf("backlog element %d (%d) is missing from the set", i, x)
		}
		if slices.Contains(items[:i], x) {
			return fmt.Errorf("backlog holds %d twice: %v", x, items)
		}
		if d.processed.contains(x) || d.failed.contains(x) {
			return fmt.Errorf("backlog holds terminal offset %d", x)
		}
		if d.leased.Load() && d.lease.Offset == x {
			return fmt.Errorf("backlog holds the leased offset %d", x)
		}
	}
	if d.leased.Load() {
		if d.processed.contains(d.lease.Offset) || d.failed.contains(d.lease.Offset) {
			return fmt.Errorf("leased offset %d is terminal", d.lease.Offset)
		}
	} else if d.lease != (Lease{}) {
		return fmt.Errorf("no lease, but the lease field holds %+v", d.lease)
	}
	return nil
}
