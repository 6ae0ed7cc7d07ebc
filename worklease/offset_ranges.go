package worklease

import "slices"

// offsetRange is the closed interval [lo, hi] of offsets.
type offsetRange struct{ lo, hi int64 }

// offsetRanges is an exact set of offsets kept as sorted, disjoint,
// non-adjacent closed ranges, so that a run of consecutive offsets costs one
// range however long it is: a domain that has processed a million
// consecutive offsets holds 16 bytes. Membership is a binary search. Adding
// is O(1) at the top end, where offsets mostly land, and O(ranges) in the
// worst case (an insertion into the middle of the slice).
type offsetRanges struct {
	r []offsetRange
}

// search returns the index of the first range whose hi is >= x, or len(s.r).
func (s *offsetRanges) search(x int64) int {
	n := len(s.r)
	if n == 0 || x > s.r[n-1].hi {
		return n
	}
	i, _ := slices.BinarySearchFunc(s.r, x, func(r offsetRange, x int64) int {
		if r.hi < x {
			return -1
		}
		return 1 // never 0: we want the first r.hi >= x
	})
	return i
}

func (s *offsetRanges) contains(x int64) bool {
	i := s.search(x)
	return i < len(s.r) && s.r[i].lo <= x
}

// add puts x in the set, merging it with the ranges next to it.
func (s *offsetRanges) add(x int64) {
	i := s.search(x)
	if i < len(s.r) && s.r[i].lo <= x {
		return // already there
	}
	// s.r[i-1].hi < x < s.r[i].lo, so neither +1 nor -1 below overflows.
	joinsLeft := i > 0 && s.r[i-1].hi+1 == x
	joinsRight := i < len(s.r) && s.r[i].lo-1 == x
	switch {
	case joinsLeft && joinsRight:
		s.r[i-1].hi = s.r[i].hi
		s.r = slices.Delete(s.r, i, i+1)
	case joinsLeft:
		s.r[i-1].hi = x
	case joinsRight:
		s.r[i].lo = x
	default:
		s.r = slices.Insert(s.r, i, offsetRange{x, x})
	}
}
