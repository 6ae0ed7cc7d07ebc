package worklease

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestOffsetRangesMatchesASet adds random offsets, sparse and out of order,
// and checks membership of every offset in the window against a plain map,
// and that the ranges stay sorted, disjoint and not adjacent.
func TestOffsetRangesMatchesASet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lo := rapid.SampledFrom([]int64{math.MinInt64, -20, 0, math.MaxInt64 - 40}).Draw(t, "lo")
		xs := rapid.SliceOf(rapid.Int64Range(lo, lo+40)).Draw(t, "xs")
		var s offsetRanges
		ref := map[int64]bool{}
		for _, x := range xs {
			s.add(x)
			ref[x] = true
			for i := range s.r {
				if s.r[i].lo > s.r[i].hi || i > 0 && s.r[i-1].hi >= s.r[i].lo-1 {
					t.Fatalf("after add(%d): bad ranges %v", x, s.r)
				}
			}
		}
		for i := int64(0); i <= 40; i++ { // not y <= lo+40: lo+40 may be MaxInt64
			y := lo + i
			if s.contains(y) != ref[y] {
				t.Fatalf("contains(%d) = %v, want %v; ranges %v", y, s.contains(y), ref[y], s.r)
			}
		}
		if lo > math.MinInt64 && s.contains(lo-1) {
			t.Fatalf("contains(%d) outside the window", lo-1)
		}
	})
}

func TestOffsetRangesMerges(t *testing.T) {
	var s offsetRanges
	for _, x := range []int64{5, 1, 3, 2, 4} {
		s.add(x)
	}
	if len(s.r) != 1 || s.r[0] != (offsetRange{1, 5}) {
		t.Fatalf("ranges = %v, want [{1 5}]", s.r)
	}
	s.add(math.MaxInt64)
	s.add(math.MinInt64)
	s.add(math.MaxInt64 - 1)
	want := []offsetRange{{math.MinInt64, math.MinInt64}, {1, 5}, {math.MaxInt64 - 1, math.MaxInt64}}
	if len(s.r) != len(want) {
		t.Fatalf("ranges = %v, want %v", s.r, want)
	}
	for i := range want {
		if s.r[i] != want[i] {
			t.Fatalf("ranges = %v, want %v", s.r, want)
		}
	}
}

// TestBacklogMatchesASlice checks the ring and its set against a plain
// slice through pushes, duplicate pushes and pops, across growth,
// wrap-around and the release of an emptied large ring.
func TestBacklogMatchesASlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b backlog
		var ref []int64
		t.Repeat(map[string]func(*rapid.T){
			"push": func(t *rapid.T) {
				x := rapid.Int64Range(0, 200).Draw(t, "x")
				dup := false
				for _, y := range ref {
					dup = dup || y == x
				}
				if got := b.push(x); got == dup {
					t.Fatalf("push(%d) = %v with %v queued", x, got, ref)
				}
				if !dup {
					ref = append(ref, x)
				}
			},
			"pushMany": func(t *rapid.T) {
				start := rapid.Int64Range(1000, 2000).Draw(t, "start")
				for x := start; x < start+100; x++ {
					if b.push(x) {
						ref = append(ref, x)
					}
				}
			},
			"pop": func(t *rapid.T) {
				if len(ref) == 0 {
					t.Skip("empty")
				}
				if got := b.pop(); got != ref[0] {
					t.Fatalf("pop() = %d, want %d", got, ref[0])
				}
				ref = ref[1:]
			},
			"": func(t *rapid.T) {
				got := b.snapshot()
				if len(got) != len(ref) || b.len() != len(ref) || len(b.set) != len(ref) {
					t.Fatalf("snapshot %v (len %d, set %d), want %v", got, b.len(), len(b.set), ref)
				}
				for i := range ref {
					if got[i] != ref[i] || !b.contains(ref[i]) {
						t.Fatalf("snapshot %v, want %v", got, ref)
					}
				}
				if h, ok := b.peek(); ok != (len(ref) > 0) || ok && h != ref[0] {
					t.Fatalf("peek() = %d, %v with %v", h, ok, ref)
				}
				if len(ref) == 0 && len(b.ring) > shrinkAbove {
					t.Fatalf("empty backlog keeps a ring of %d", len(b.ring))
				}
			},
		})
	})
}
