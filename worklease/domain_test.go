package worklease

import (
	"errors"
	"testing"
	"time"
	"unsafe"
)

// TestAcquireLockedAsksForATokenFirst covers the second pass of TryAcquire,
// which only a race reaches: a domain that looked busy is acquirable by the
// time the lock is held. Without a token, acquireLocked must change nothing
// and ask for one; with it, it must acquire (and pop the head).
func TestAcquireLockedAsksForATokenFirst(t *testing.T) {
	var d domain
	d.backlog.push(4)
	d.backlog.push(5)
	res, mint, err := d.acquireLocked("A", 4, false, "", time.Time{})
	if err != nil || !mint || res != (AcquireResult{}) {
		t.Fatalf("without a token: %+v, %v, %v; want a request for one", res, mint, err)
	}
	if d.leased.Load() || d.backlog.len() != 2 {
		t.Fatalf("the request changed the domain: leased %v, backlog %v", d.leased.Load(), d.backlog.snapshot())
	}
	if _, mint, err := d.acquireLocked("A", 5, false, "", time.Time{}); mint || !errors.Is(err, ErrBacklogOrdering) {
		t.Fatalf("non-head without a token: mint %v, err %v; want the ordering error first", mint, err)
	}
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	res, mint, err = d.acquireLocked("A", 4, true, "tok", at)
	if err != nil || mint || res != (AcquireResult{Code: Acquired, Token: "tok"}) {
		t.Fatalf("with a token: %+v, %v, %v", res, mint, err)
	}
	if d.lease != (Lease{Offset: 4, Token: "tok", AcquiredAt: at}) || !d.leased.Load() {
		t.Fatalf("lease = %+v", d.lease)
	}
	if got := d.backlog.snapshot(); len(got) != 1 || got[0] != 5 {
		t.Fatalf("backlog = %v, want [5]", got)
	}
	// A token in hand does not turn a non-acquisition into one.
	res, mint, err = d.acquireLocked("A", 6, true, "unused", at)
	if err != nil || mint || res.Code != Enqueued {
		t.Fatalf("busy with a token: %+v, %v, %v; want Enqueued", res, mint, err)
	}
}

// TestDomainRecordFillsCacheLines keeps the padding of domain right when
// fields change: see the comment on its last field.
func TestDomainRecordFillsCacheLines(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the padding is sized for 64-bit platforms")
	}
	if size := unsafe.Sizeof(domain{}); size%64 != 0 {
		t.Fatalf("domain is %d bytes, want a multiple of 64: adjust its padding", size)
	}
}
