package worklease

// shrinkAbove is the ring capacity above which an emptied backlog gives its
// memory back, so that one burst does not pin a large buffer for good.
const shrinkAbove = 64

// backlog is a FIFO queue of distinct offsets: a ring buffer for the order
// and a map for O(1) membership. Both are allocated on first use, so a
// domain that never queues anything pays for neither.
type backlog struct {
	ring []int64 // len(ring) is the capacity, a power of two
	head int     // index of the first element in ring
	n    int     // number of elements
	set  map[int64]struct{}
}

func (b *backlog) len() int { return b.n }

func (b *backlog) contains(x int64) bool {
	_, ok := b.set[x]
	return ok
}

// peek returns the head without removing it.
func (b *backlog) peek() (int64, bool) {
	if b.n == 0 {
		return 0, false
	}
	return b.ring[b.head], true
}

// push appends x at the tail unless it is already queued, and reports
// whether it did.
func (b *backlog) push(x int64) bool {
	if b.contains(x) {
		return false
	}
	if b.set == nil {
		b.set = make(map[int64]struct{})
	}
	if b.n == len(b.ring) {
		b.grow()
	}
	b.ring[(b.head+b.n)&(len(b.ring)-1)] = x
	b.n++
	b.set[x] = struct{}{}
	return true
}

func (b *backlog) grow() {
	ring := make([]int64, max(8, 2*len(b.ring)))
	b.copyTo(ring)
	b.ring, b.head = ring, 0
}

// pop removes the head; the backlog must not be empty.
func (b *backlog) pop() int64 {
	x := b.ring[b.head]
	b.head = (b.head + 1) & (len(b.ring) - 1)
	b.n--
	delete(b.set, x)
	if b.n == 0 {
		b.head = 0
		if len(b.ring) > shrinkAbove {
			b.ring, b.set = nil, nil
		}
	}
	return x
}

// copyTo copies the elements, head first, into dst, which must be long
// enough.
func (b *backlog) copyTo(dst []int64) {
	k := copy(dst, b.ring[b.head:min(b.head+b.n, len(b.ring))])
	copy(dst[k:b.n], b.ring)
}

// snapshot returns the elements head first, or nil when there are none.
func (b *backlog) snapshot() []int64 {
	if b.n == 0 {
		return nil
	}
	out := make([]int64, b.n)
	b.copyTo(out)
	return out
}
