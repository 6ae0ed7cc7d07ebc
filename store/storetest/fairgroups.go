package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// grouped returns n messages of fairness group g, named g1, g2, ...
func grouped(g string, n int) []store.NewMessage {
	out := make([]store.NewMessage, n)
	for i := range out {
		out[i] = store.NewMessage{Payload: []byte(g + string(rune('1'+i))), FairGroup: g}
	}
	return out
}

// A message of a fairness group is placed right behind its group's last
// ready message, or behind the queue's first one, never after its own
// time: a group's backlog takes turns with other groups' new messages
// instead of holding them up, and the messages of one group still run
// concurrently.
func testFairGroups(t *testing.T, f Factory) {
	b := setup(t, f)
	var a []int64
	for _, m := range grouped("a", 4) {
		a = append(a, b.enqueue(m)...)
		b.clk.Advance(time.Millisecond)
	}
	b.clk.Advance(time.Second)
	plain := b.send("plain")
	var g []int64
	for _, m := range grouped("b", 3) {
		g = append(g, b.enqueue(m)...)
		b.clk.Advance(time.Millisecond)
	}
	// A batch places its messages as one by one.
	c := b.enqueue(grouped("c", 2)...)
	ds := b.claim(4)
	sameIDs(t, "the first claim", ids(ds), []int64{a[0], g[0], c[0], a[1]})
	sameIDs(t, "the next claim", ids(b.claim(100)), []int64{g[1], c[1], a[2], g[2], a[3], plain})

	// With nothing ready, a group's message is placed at its time; one
	// delayed is placed at its visibility, as any other.
	b.clk.Advance(time.Second)
	next := b.enqueue(store.NewMessage{FairGroup: "a"})[0]
	now := b.clk.Now()
	delayed := b.enqueue(store.NewMessage{FairGroup: "b", Delay: time.Minute})[0]
	if at := b.info(next).VisibleAt; !at.Equal(now) {
		t.Fatalf("a group's message on an empty queue is visible at %v, want its own time %v", at, now)
	}
	if at := b.info(delayed).VisibleAt; !at.Equal(now.Add(time.Minute)) {
		t.Fatalf("a delayed message of a group is visible at %v, want %v", at, now.Add(time.Minute))
	}
	// A group's next message goes a microsecond behind its last, ahead
	// of an ungrouped one sent between them.
	b.clk.Advance(time.Millisecond)
	late := b.send("late")
	b.clk.Advance(time.Millisecond)
	after := b.enqueue(store.NewMessage{FairGroup: "a"})[0]
	if at := b.info(after).VisibleAt; !at.Equal(now.Add(time.Microsecond)) {
		t.Fatalf("a's next message is visible at %v, want a microsecond after its last, %v", at, now.Add(time.Microsecond))
	}
	// A dedup id changes nothing in placement.
	deduped := b.enqueue(store.NewMessage{FairGroup: "a", DedupID: "once"})[0]
	if at := b.info(deduped).VisibleAt; !at.Equal(now.Add(2 * time.Microsecond)) {
		t.Fatalf("a's message with a dedup id is visible at %v, want %v", at, now.Add(2*time.Microsecond))
	}
	sameIDs(t, "the third claim", ids(b.claim(100)), []int64{next, after, deduped, late})

	// A group with a key is refused, and changes nothing.
	before := b.stats()
	_, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, FairGroup: "a", Key: "k"}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Enqueue of a message with a key and a fairness group: %v, want ErrInvalid", err)
	}
	if after := b.stats(); after != before {
		t.Fatalf("a refused enqueue changed the stats from %+v to %+v", before, after)
	}
}
