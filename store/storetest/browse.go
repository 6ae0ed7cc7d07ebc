package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// browsed is a queue's messages in every state, as browseFixture leaves
// them: index i holds the id of the i-th message it enqueued.
//
//	0  key k, kind email   completed
//	1  key k, kind sms     dead (permanent_error)
//	2  key k, kind email   processing: the head of k
//	3  key k, kind email   waiting
//	4  key k, kind sms     waiting
//	5  kind email          completed
//	6  kind sms            dead (max_deliveries)
//	7  kind email          pending
//	8  key j, kind email   pending: the head of j
//	9  key j               waiting
//	10 key k, kind email   pending, of the queue "other"
//	11 kind email          cancelled
//	12 key k               cancelled
type browsed []int64

// browseFixture enqueues the messages that browsed describes and moves
// each into its state.
func (b *bundle) browseFixture() browsed {
	b.t.Helper()
	ids := browsed(b.enqueue(
		store.NewMessage{Key: "k", Kind: "email", Payload: []byte("0")},
		store.NewMessage{Key: "k", Kind: "sms", Payload: []byte("1")},
		store.NewMessage{Key: "k", Kind: "email", Payload: []byte("2")},
		store.NewMessage{Key: "k", Kind: "email", Payload: []byte("3")},
		store.NewMessage{Key: "k", Kind: "sms", Payload: []byte("4")},
		store.NewMessage{Kind: "email", Payload: []byte("5")},
		store.NewMessage{Kind: "sms", MaxDeliveries: 1, Payload: []byte("6")},
		store.NewMessage{Kind: "email", Payload: []byte("7"), Attributes: []byte("attrs of 7")},
		store.NewMessage{Key: "j", Kind: "email", Payload: []byte("8")},
		store.NewMessage{Key: "j", Payload: []byte("9")},
		store.NewMessage{Queue: "other", Key: "k", Kind: "email", Payload: []byte("10")},
		store.NewMessage{Kind: "email", Payload: []byte("11")},
		store.NewMessage{Key: "k", Payload: []byte("12")},
	))
	if _, err := b.s.Cancel(b.ctx, b.queue, []int64{ids[11], ids[12]}); err != nil {
		b.t.Fatal(err)
	}
	// Each round claims every pending message of the queue and settles
	// them: settle says how, by id; the rest are given back.
	round := func(settle map[int64]func(store.Lease)) {
		b.t.Helper()
		for _, d := range b.claim(100) {
			if fn, ok := settle[d.MessageID]; ok {
				fn(d.Lease)
				continue
			}
			if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Uncount: true}); err != nil {
				b.t.Fatal(err)
			}
		}
	}
	fail := func(permanent bool) func(store.Lease) {
		return func(l store.Lease) {
			if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: l, Error: "failed", Permanent: permanent}); err != nil || !dead {
				b.t.Fatalf("Fail(%s) = %v, %v; want dead", l, dead, err)
			}
		}
	}
	keep := func(store.Lease) {}
	round(map[int64]func(store.Lease){ids[0]: b.mustComplete, ids[5]: b.mustComplete, ids[6]: fail(false)})
	round(map[int64]func(store.Lease){ids[1]: fail(true)})
	round(map[int64]func(store.Lease){ids[2]: keep})
	for i, want := range []store.State{store.Completed, store.Dead, store.Processing, store.Waiting, store.Waiting, store.Completed,
		store.Dead, store.Pending, store.Pending, store.Waiting} {
		b.wantState(ids[i], want)
	}
	return ids
}

// of returns the ids at the fixture's indexes.
func (ids browsed) of(indexes ...int) []int64 {
	out := make([]int64, len(indexes))
	for i, x := range indexes {
		out[i] = ids[x]
	}
	return out
}

// listIDs lists with f (of the suite's queue unless f names one) and
// returns the ids, checking that each message is of the queue and state.
func (b *bundle) listIDs(f store.ListFilter) []int64 {
	b.t.Helper()
	if f.Queue == "" {
		f.Queue = b.queue
	}
	infos, err := b.s.List(b.ctx, f)
	if err != nil {
		b.t.Fatalf("List(%+v): %v", f, err)
	}
	out := []int64{}
	for _, in := range infos {
		if in.Queue != f.Queue || in.State != f.State {
			b.t.Fatalf("List(%+v) listed message %d of queue %q, %s", f, in.ID, in.Queue, in.State)
		}
		out = append(out, in.ID)
	}
	return out
}

// List's filters on key, kind and dead reason, each with the queue and
// state, alone or together, with paging forward and backward.
func testListFilters(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.browseFixture()
	for _, c := range []struct {
		f    store.ListFilter
		want []int64
	}{
		{store.ListFilter{State: store.Pending}, ids.of(7, 8)},
		{store.ListFilter{State: store.Pending, Key: "j"}, ids.of(8)},
		{store.ListFilter{State: store.Pending, Key: "k"}, ids.of()},
		{store.ListFilter{Queue: "other", State: store.Pending, Key: "k"}, ids.of(10)},
		{store.ListFilter{State: store.Pending, Kind: "email"}, ids.of(7, 8)},
		{store.ListFilter{State: store.Pending, Kind: "sms"}, ids.of()},
		{store.ListFilter{State: store.Waiting, Key: "k"}, ids.of(3, 4)},
		{store.ListFilter{State: store.Waiting, Key: "j"}, ids.of(9)},
		{store.ListFilter{State: store.Waiting, Kind: "sms"}, ids.of(4)},
		{store.ListFilter{State: store.Waiting, Key: "k", Kind: "email"}, ids.of(3)},
		{store.ListFilter{State: store.Waiting, Key: "nothing"}, ids.of()},
		{store.ListFilter{State: store.Processing, Key: "k"}, ids.of(2)},
		{store.ListFilter{State: store.Processing, Key: "j"}, ids.of()},
		{store.ListFilter{State: store.Processing, Kind: "sms"}, ids.of()},
		{store.ListFilter{State: store.Completed}, ids.of(0, 5)},
		{store.ListFilter{State: store.Completed, Key: "k"}, ids.of(0)},
		{store.ListFilter{State: store.Completed, Key: "j"}, ids.of()},
		{store.ListFilter{State: store.Completed, Kind: "email"}, ids.of(0, 5)},
		{store.ListFilter{State: store.Completed, Key: "k", Kind: "sms"}, ids.of()},
		{store.ListFilter{State: store.Dead}, ids.of(1, 6)},
		{store.ListFilter{State: store.Dead, Key: "k"}, ids.of(1)},
		{store.ListFilter{State: store.Dead, Reason: store.ReasonPermanent}, ids.of(1)},
		{store.ListFilter{State: store.Dead, Reason: store.ReasonMaxDeliveries}, ids.of(6)},
		{store.ListFilter{State: store.Dead, Reason: store.ReasonLeaseExpired}, ids.of()},
		{store.ListFilter{State: store.Dead, Kind: "sms", Reason: store.ReasonMaxDeliveries}, ids.of(6)},
		{store.ListFilter{State: store.Dead, Key: "k", Reason: store.ReasonMaxDeliveries}, ids.of()},
		{store.ListFilter{State: store.Cancelled}, ids.of(11, 12)},
		{store.ListFilter{State: store.Cancelled, Key: "k"}, ids.of(12)},
		{store.ListFilter{State: store.Cancelled, Kind: "email"}, ids.of(11)},
		// Paging forward, filtered.
		{store.ListFilter{State: store.Waiting, Key: "k", Limit: 1}, ids.of(3)},
		{store.ListFilter{State: store.Waiting, Key: "k", AfterID: ids[3]}, ids.of(4)},
		{store.ListFilter{State: store.Waiting, Key: "k", AfterID: ids[4]}, ids.of()},
		{store.ListFilter{State: store.Completed, Kind: "email", AfterID: ids[0]}, ids.of(5)},
		// Paging backward: newest first.
		{store.ListFilter{State: store.Waiting, BeforeID: ids[12] + 1000}, ids.of(9, 4, 3)},
		{store.ListFilter{State: store.Waiting, BeforeID: ids[9], Limit: 1}, ids.of(4)},
		{store.ListFilter{State: store.Waiting, BeforeID: ids[4]}, ids.of(3)},
		{store.ListFilter{State: store.Waiting, BeforeID: ids[3]}, ids.of()},
		{store.ListFilter{State: store.Waiting, AfterID: ids[3], BeforeID: ids[9]}, ids.of(4)},
		{store.ListFilter{State: store.Waiting, Key: "k", BeforeID: ids[9]}, ids.of(4, 3)},
		{store.ListFilter{State: store.Pending, BeforeID: ids[12]}, ids.of(8, 7)},
		{store.ListFilter{State: store.Completed, BeforeID: ids[5]}, ids.of(0)},
		{store.ListFilter{State: store.Completed, Key: "k", BeforeID: ids[12]}, ids.of(0)},
		{store.ListFilter{State: store.Dead, Reason: store.ReasonPermanent, BeforeID: ids[12]}, ids.of(1)},
		{store.ListFilter{State: store.Cancelled, BeforeID: ids[12] + 1, Limit: 1}, ids.of(12)},
	} {
		if got := b.listIDs(c.f); !slices.Equal(got, c.want) {
			t.Errorf("List(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
	// The listed messages are described in full, filtered or not.
	infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: store.Pending, Kind: "email", BeforeID: ids[8]})
	if err != nil || len(infos) != 1 {
		t.Fatalf("List of 7 = %+v, %v", infos, err)
	}
	if in := infos[0]; string(in.Payload) != "7" || string(in.Attributes) != "attrs of 7" || in.Kind != "email" {
		t.Fatalf("List of 7 = %+v; want its payload, attributes and kind", in)
	}
}

// A filter the store cannot apply is ErrInvalid, and changes nothing.
func testListFiltersBadInput(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.browseFixture()
	before := b.stats()
	long := strings.Repeat("k", store.MaxNameLength+1)
	for _, bad := range []store.ListFilter{
		{State: store.Completed, Reason: store.ReasonPermanent},
		{State: store.Pending, Reason: store.ReasonMaxDeliveries},
		{State: store.Cancelled, Reason: store.ReasonPermanent},
		{State: store.Dead, Reason: "bad\x00reason"},
		{State: store.Pending, BeforeID: -1},
		{State: store.Waiting, Key: long},
		{State: store.Waiting, Key: "k\x00"},
		{State: store.Waiting, Key: "\xff"},
		{State: store.Pending, Kind: long},
		{State: store.Pending, Kind: "e\x00mail"},
	} {
		bad.Queue = b.queue
		if infos, err := b.s.List(b.ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("List(%+v) = %d messages, %v; want ErrInvalid", bad, len(infos), err)
		}
	}
	if after := b.stats(); after != before {
		t.Fatalf("bad filters changed the queue: %+v -> %+v", before, after)
	}
	if got := b.listIDs(store.ListFilter{State: store.Dead, Reason: store.ReasonPermanent}); !slices.Equal(got, ids.of(1)) {
		t.Fatalf("dead messages after the bad filters: %v, want %v", got, ids.of(1))
	}
}

// Get finds a message by id, of any queue and in any state, described as
// List describes it; an id that names no message is ErrNotFound.
func testGet(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.browseFixture()
	listed := map[int64]store.Info{}
	for _, queue := range []string{b.queue, "other"} {
		for st := range store.State(store.States) {
			infos, err := b.s.List(b.ctx, store.ListFilter{Queue: queue, State: st, Limit: store.MaxBatch})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				listed[in.ID] = in
			}
		}
	}
	if len(listed) != len(ids) {
		t.Fatalf("%d messages listed, want %d", len(listed), len(ids))
	}
	for i, id := range ids {
		got, err := b.s.Get(b.ctx, id)
		if err != nil {
			t.Fatalf("Get(%d): %v", id, err)
		}
		if want := listed[id]; !sameInfo(got, want) {
			t.Errorf("Get(%d)\n got  %+v\n want %+v (as listed)", id, got, want)
		}
		if string(got.Payload) != fmt.Sprint(i) {
			t.Errorf("Get(%d) has payload %q, want %q", id, got.Payload, fmt.Sprint(i))
		}
	}
	processing, err := b.s.Get(b.ctx, ids[2])
	if err != nil || processing.State != store.Processing || processing.LeaseExpires.IsZero() || processing.WorkerID != "w1" ||
		processing.FencingToken == 0 || processing.Key != "k" || processing.Kind != "email" {
		t.Fatalf("Get of a processing message = %+v, %v; want its lease", processing, err)
	}
	dead, err := b.s.Get(b.ctx, ids[6])
	if err != nil || dead.State != store.Dead || dead.DeadReason != store.ReasonMaxDeliveries || dead.LastError != "failed" || dead.FinishedAt.IsZero() {
		t.Fatalf("Get of a dead message = %+v, %v; want why it died and when", dead, err)
	}
	if other, err := b.s.Get(b.ctx, ids[10]); err != nil || other.Queue != "other" || other.State != store.Pending {
		t.Fatalf("Get of another queue's message = %+v, %v", other, err)
	}
	for _, id := range []int64{0, -1, ids[12] + 1000} {
		if in, err := b.s.Get(b.ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%d) = %+v, %v; want ErrNotFound", id, in, err)
		}
	}
	// A purged message is gone.
	if n, err := b.s.Purge(b.ctx, b.queue, []int64{ids[6]}); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
	if _, err := b.s.Get(b.ctx, ids[6]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a purged message: %v, want ErrNotFound", err)
	}
}

// sameInfo compares every field of two descriptions of a message.
func sameInfo(a, b store.Info) bool {
	return a.ID == b.ID && a.Queue == b.Queue && a.Key == b.Key && a.DedupID == b.DedupID && a.Kind == b.Kind &&
		a.Priority == b.Priority && a.State == b.State && string(a.Payload) == string(b.Payload) &&
		a.Deliveries == b.Deliveries && a.MaxDeliveries == b.MaxDeliveries && a.FencingToken == b.FencingToken &&
		a.WorkerID == b.WorkerID && a.LastError == b.LastError && a.DeadReason == b.DeadReason &&
		a.EnqueuedAt.Equal(b.EnqueuedAt) && a.VisibleAt.Equal(b.VisibleAt) && a.LeaseExpires.Equal(b.LeaseExpires) &&
		a.FinishedAt.Equal(b.FinishedAt) && string(a.Attributes) == string(b.Attributes) && (a.Attributes == nil) == (b.Attributes == nil) &&
		a.FirstClaimedAt.Equal(b.FirstClaimedAt)
}

// BlockedKeys lists the keys with waiting messages, by key, with how many
// wait and their head, pending or processing; a key whose head waits for
// nothing is not listed. Pages follow afterKey.
func testBlockedKeys(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.enqueue(
		store.NewMessage{Key: "b"}, // 0: claimed, the head of b
		store.NewMessage{Key: "b"},
		store.NewMessage{Key: "a"}, // 2: the head of a, pending
		store.NewMessage{Key: "a"},
		store.NewMessage{Key: "a"},
		store.NewMessage{Key: "c"}, // 5: alone, blocks nothing
		store.NewMessage{Key: "d"}, // 6: the head of d, pending
		store.NewMessage{Key: "d"},
		store.NewMessage{Key: "d"},
		store.NewMessage{Key: "d"},
		store.NewMessage{Queue: "other", Key: "a"}, // 10: another queue's
		store.NewMessage{Queue: "other", Key: "a"},
		store.NewMessage{}, // 12: no key
	)
	head := b.claimOne()
	if head.MessageID != ids[0] {
		t.Fatalf("claimed %d, want %d", head.MessageID, ids[0])
	}
	type want struct {
		key     string
		waiting int64
		head    int64
		state   store.State
	}
	check := func(queue, after string, limit int, wants ...want) {
		t.Helper()
		got, err := b.s.BlockedKeys(b.ctx, queue, after, limit)
		if err != nil {
			t.Fatalf("BlockedKeys(%q, %q, %d): %v", queue, after, limit, err)
		}
		if len(got) != len(wants) {
			t.Fatalf("BlockedKeys(%q, %q, %d) = %+v; want %d keys: %+v", queue, after, limit, got, len(wants), wants)
		}
		for i, w := range wants {
			g := got[i]
			if g.Key != w.key || g.Waiting != w.waiting || g.Head.ID != w.head || g.Head.State != w.state ||
				g.Head.Key != w.key || g.Head.Queue != queue {
				t.Fatalf("BlockedKeys(%q, %q, %d)[%d] = %+v; want key %q, %d waiting, head %d %s", queue, after, limit, i, g,
					w.key, w.waiting, w.head, w.state)
			}
			if in, err := b.s.Get(b.ctx, w.head); err != nil || !sameInfo(g.Head, in) {
				t.Fatalf("the head of %q\n got  %+v\n want %+v, %v (as Get describes it)", w.key, g.Head, in, err)
			}
		}
	}
	a := want{"a", 2, ids[2], store.Pending}
	bk := want{"b", 1, ids[0], store.Processing}
	d := want{"d", 3, ids[6], store.Pending}
	check(b.queue, "", 0, a, bk, d)
	check(b.queue, "", store.MaxBatch, a, bk, d)
	check(b.queue, "", 1, a)
	check(b.queue, "a", 1, bk)
	check(b.queue, "b", 2, d)
	check(b.queue, "d", 0)
	check(b.queue, "aa", 0, bk, d) // afterKey need not be a key
	check("other", "", 0, want{"a", 1, ids[10], store.Pending})
	check("never-used", "", 0)

	// Once b's head completes, its next message runs and nothing waits.
	b.mustComplete(head.Lease)
	check(b.queue, "", 0, a, d)
	// A cancelled waiting message no longer waits.
	if _, err := b.s.Cancel(b.ctx, b.queue, []int64{ids[3]}); err != nil {
		t.Fatal(err)
	}
	check(b.queue, "", 0, want{"a", 1, ids[2], store.Pending}, d)

	for _, bad := range []struct {
		queue, after string
		limit        int
	}{{b.queue, "", -1}, {b.queue, "", store.MaxBatch + 1}, {"", "", 0}, {b.queue, "a\x00", 0},
		{b.queue, strings.Repeat("a", store.MaxNameLength+1), 0}} {
		if got, err := b.s.BlockedKeys(b.ctx, bad.queue, bad.after, bad.limit); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("BlockedKeys(%q, %q, %d) = %+v, %v; want ErrInvalid", bad.queue, bad.after, bad.limit, got, err)
		}
	}
}

// Queues lists a queue that holds messages in any one state, alone, and
// one that is paused or has a record; a queue whose messages are all
// pruned or deleted, with no record and no pause, is gone.
func testQueuesOfEveryState(t *testing.T, f Factory) {
	b := setup(t, f)
	b.enqueue(
		store.NewMessage{Queue: "pending"},
		store.NewMessage{Queue: "processing"},
		store.NewMessage{Queue: "waiting", Key: "k"},
		store.NewMessage{Queue: "waiting", Key: "k"},
		store.NewMessage{Queue: "completed"},
		store.NewMessage{Queue: "dead"},
		store.NewMessage{Queue: "cancelled"},
		store.NewMessage{Queue: "recorded-then-purged"},
	)
	b.claimFrom("processing")
	b.claimFrom("waiting")
	b.queue = "completed"
	b.mustComplete(b.claimOne().Lease)
	b.queue = "dead"
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: b.claimOne().Lease, Permanent: true}); err != nil || !dead {
		t.Fatalf("Fail = %v, %v", dead, err)
	}
	cancelled, err := b.s.List(b.ctx, store.ListFilter{Queue: "cancelled", State: store.Pending})
	if err != nil || len(cancelled) != 1 {
		t.Fatalf("List of cancelled = %+v, %v", cancelled, err)
	}
	if _, err := b.s.Cancel(b.ctx, "cancelled", []int64{cancelled[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Pause(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"recorded", "recorded-then-purged"} {
		if _, _, err := b.s.CreateQueue(b.ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	wantQueues := func(want ...string) {
		t.Helper()
		if got, err := b.s.Queues(b.ctx); err != nil || !slices.Equal(got, want) {
			t.Fatalf("Queues = %v, %v; want %v", got, err, want)
		}
	}
	wantQueues("cancelled", "completed", "dead", "paused", "pending", "processing", "recorded", "recorded-then-purged", "waiting")

	// Past the dedup window, pruning empties three queues.
	b.clk.Advance(store.DefaultDedupWindow + time.Second)
	for _, p := range []store.Prune{{Queue: "completed", State: store.Completed}, {Queue: "dead", State: store.Dead},
		{Queue: "cancelled", State: store.Cancelled}} {
		p.Limit = 10
		if n, err := b.s.Prune(b.ctx, p); err != nil || n != 1 {
			t.Fatalf("Prune(%+v) = %d, %v; want 1", p, n, err)
		}
	}
	if n, err := b.s.PurgeQueue(b.ctx, "recorded-then-purged"); err != nil || n != 1 {
		t.Fatalf("PurgeQueue = %d, %v", n, err)
	}
	if n, err := b.s.DeleteQueue(b.ctx, "processing"); err != nil || n != 1 {
		t.Fatalf("DeleteQueue = %d, %v", n, err)
	}
	wantQueues("paused", "pending", "recorded", "recorded-then-purged", "waiting")
	// A queue whose completed messages were purged with the queue is gone
	// too: its count is back to nothing.
	b.enqueue(store.NewMessage{Queue: "completed"})
	b.queue = "completed"
	b.mustComplete(b.claimOne().Lease)
	wantQueues("completed", "paused", "pending", "recorded", "recorded-then-purged", "waiting")
	if _, err := b.s.PurgeQueue(b.ctx, "completed"); err != nil {
		t.Fatal(err)
	}
	wantQueues("paused", "pending", "recorded", "recorded-then-purged", "waiting")
}

func testStatsAndList(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.enqueue(
		store.NewMessage{Payload: []byte("a")},
		store.NewMessage{Payload: []byte("b")},
		store.NewMessage{Payload: []byte("c"), Key: "K"},
		store.NewMessage{Payload: []byte("d"), Key: "K"},
		store.NewMessage{Payload: []byte("e"), MaxDeliveries: 1},
		store.NewMessage{Payload: []byte("f"), Delay: time.Hour},
	)
	b.clk.Advance(10 * time.Second)
	ds := b.claim(2) // a, b
	b.mustComplete(ds[0].Lease)
	st := b.stats()
	// f, delayed an hour, is pending but not visible.
	want := store.Stats{Queue: b.queue, Pending: 3, Waiting: 1, Processing: 1, Completed: 1, BlockedKeys: 1, OldestPendingAge: 10 * time.Second,
		Delayed: 1}
	if st != want {
		t.Fatalf("stats\n got  %+v\n want %+v", st, want)
	}
	list := func(s store.State) []int64 {
		infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: s})
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, in := range infos {
			out = append(out, in.ID)
		}
		return out
	}
	sameIDs(t, "pending", list(store.Pending), []int64{ids[2], ids[4], ids[5]})
	sameIDs(t, "waiting", list(store.Waiting), []int64{ids[3]})
	sameIDs(t, "processing", list(store.Processing), []int64{ids[1]})
	sameIDs(t, "completed", list(store.Completed), []int64{ids[0]})
	sameIDs(t, "dead", list(store.Dead), nil)
	page, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: store.Pending, AfterID: ids[2], Limit: 1})
	if err != nil || len(page) != 1 || page[0].ID != ids[4] {
		t.Fatalf("paged list = %+v, %v", page, err)
	}
	if st, err := b.s.Stats(b.ctx, "never-used"); err != nil || st != (store.Stats{Queue: "never-used"}) {
		t.Fatalf("stats of an unused queue = %+v, %v", st, err)
	}
}
