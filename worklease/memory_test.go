package worklease_test

import (
	"reflect"
	"testing"

	"github.com/leasehold/leasehold/worklease"
)

// TestMillionOffsetsStayCompact processes 1,000,000 consecutive offsets in
// one domain, then checks that the terminal sets are one range in well
// under 64 KiB, and that idempotence is still exact: at both ends of the
// run, in the middle, just outside it, and for sparse offsets added out of
// order afterwards.
func TestMillionOffsetsStayCompact(t *testing.T) {
	const n = 1_000_000
	b := setup(t, 0)
	for offset := int64(1); offset <= n; offset++ {
		r, err := b.l.TryAcquire("d", offset)
		if err != nil || r.Code != worklease.Acquired {
			t.Fatalf("TryAcquire(%d) = %v, %v", offset, r, err)
		}
		if _, err := b.l.Succeed("d", r.Token); err != nil {
			t.Fatal(err)
		}
	}
	processed, failed, bytes := worklease.TerminalRanges(b.l, "d")
	if !reflect.DeepEqual(processed, [][2]int64{{1, n}}) || failed != nil {
		t.Fatalf("processed %v, failed %v; want [[1 %d]] and none", processed, failed, n)
	}
	if bytes >= 64<<10 {
		t.Fatalf("terminal sets hold %d bytes, want under 64 KiB", bytes)
	}
	t.Logf("terminal sets of %d offsets: %d ranges, %d bytes", n, len(processed), bytes)

	for _, offset := range []int64{1, 2, n / 2, n - 1, n} {
		b.acquire(t, "d", offset, worklease.AlreadyProcessed)
	}
	// Sparse and out of order, with failures in between.
	finish := func(offset int64, ok bool) {
		t.Helper()
		r := b.acquire(t, "d", offset, worklease.Acquired)
		if ok {
			b.succeed(t, "d", r.Token, worklease.SucceedResult{Code: worklease.NoBacklog})
		} else {
			b.fail(t, "d", r.Token, worklease.FailResult{Code: worklease.GiveUpNoBacklog})
		}
	}
	finish(0, true)
	finish(n+2, true)
	finish(3*n, false)
	finish(n+1, false)
	finish(2*n, true)
	finish(-5, true)
	processed, failed, _ = worklease.TerminalRanges(b.l, "d")
	wantP := [][2]int64{{-5, -5}, {0, n}, {n + 2, n + 2}, {2 * n, 2 * n}}
	wantF := [][2]int64{{n + 1, n + 1}, {3 * n, 3 * n}}
	if !reflect.DeepEqual(processed, wantP) || !reflect.DeepEqual(failed, wantF) {
		t.Fatalf("processed %v, failed %v; want %v and %v", processed, failed, wantP, wantF)
	}
	for _, c := range []struct {
		offset int64
		want   worklease.AcquireCode
	}{
		{-5, worklease.AlreadyProcessed}, {0, worklease.AlreadyProcessed}, {n, worklease.AlreadyProcessed},
		{n + 1, worklease.AlreadyFailed}, {n + 2, worklease.AlreadyProcessed},
		{2 * n, worklease.AlreadyProcessed}, {3 * n, worklease.AlreadyFailed},
	} {
		b.acquire(t, "d", c.offset, c.want)
	}
	for _, offset := range []int64{-6, -4, -1, n + 3, 2*n - 1, 2*n + 1, 3*n - 1} {
		r := b.acquire(t, "d", offset, worklease.Acquired)
		b.succeed(t, "d", r.Token, worklease.SucceedResult{Code: worklease.NoBacklog})
	}
}
