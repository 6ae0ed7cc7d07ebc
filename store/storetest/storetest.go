// Package storetest is the conformance suite for store.Store backends. Every
// backend runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store { ... })
//	}
//
// Each test gets a new, empty store from the factory, with a fake clock as
// its time authority, and may run in parallel with the others.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
)

// Factory returns a new, empty store whose time authority is clk, and
// arranges (with t.Cleanup) for it to be closed and removed.
type Factory func(t *testing.T, clk clock.Clock) store.Store

// lease is the lease duration tests use unless they need another.
const lease = 30 * time.Second

type bundle struct {
	t     *testing.T
	ctx   context.Context
	clk   *clocktest.Clock
	s     store.Store
	queue string
}

func setup(t *testing.T, f Factory) *bundle {
	t.Helper()
	t.Parallel()
	clk := clocktest.New()
	return &bundle{t: t, ctx: context.Background(), clk: clk, s: f(t, clk), queue: "q"}
}

// Option adjusts what the suite expects of a backend.
type Option func(*options)

type options struct {
	claimsSkipLocked bool
}

// ClaimsSkipLocked tells the suite that a claim passes over a message
// another operation holds locked at that moment, as PostgreSQL's FOR UPDATE
// SKIP LOCKED does, even when that operation then leaves the message as it
// was (a lease check that fails still locks the row until its transaction
// ends). The linearizability test then accepts an empty claim of a pending
// message, but only from a claim that ran concurrently with another
// operation on the message.
func ClaimsSkipLocked() Option { return func(o *options) { o.claimsSkipLocked = true } }

// Run runs the whole suite.
func Run(t *testing.T, f Factory, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"EnqueueClaimComplete", testEnqueueClaimComplete},
		{"EnqueueIsAtomic", testEnqueueIsAtomic},
		{"Fencing", testFencing},
		{"ExpiredLeaseIsLost", testExpiredLeaseIsLost},
		{"FencingTokensIncrease", testFencingTokensIncrease},
		{"DelayAndVisibility", testDelayAndVisibility},
		{"ClaimOrderAndBatchLimit", testClaimOrderAndBatchLimit},
		{"DeliveriesCountedAtClaim", testDeliveriesCountedAtClaim},
		{"FailRetriesThenDeadLetters", testFailRetriesThenDeadLetters},
		{"PermanentFailure", testPermanentFailure},
		{"ReleaseAndUncount", testReleaseAndUncount},
		{"CountedReleaseUsesTheBudget", testCountedReleaseUsesTheBudget},
		{"AnyErrorTextIsRecorded", testAnyErrorTextIsRecorded},
		{"RedriveAndPurge", testRedriveAndPurge},
		{"Dedup", testDedup},
		{"Reaper", testReaper},
		{"ConcurrentReapers", testConcurrentReapers},
		{"ReaperDeadLettersExhausted", testReaperDeadLettersExhausted},
		{"KeyFIFO", testKeyFIFO},
		{"KeyRetryingHeadBlocks", testKeyRetryingHeadBlocks},
		{"KeyDeadHeadUnblocks", testKeyDeadHeadUnblocks},
		{"KeyRedriveWaitsBehindHead", testKeyRedriveWaitsBehindHead},
		{"WakeupOnEnqueue", testWakeupOnEnqueue},
		{"BatchExtendReportsLost", testBatchExtendReportsLost},
		{"CompleteBatchPerMessage", testCompleteBatchPerMessage},
		{"CompleteWithReply", testCompleteWithReply},
		{"FailWithReply", testFailWithReply},
		{"Kind", testKind},
		{"ConcurrentReceivers", testConcurrentReceivers},
		{"BadInputChangesNothing", testBadInputChangesNothing},
		{"StatsAndList", testStatsAndList},
		{"Retention", testRetention},
		{"PingAndClose", testPingAndClose},
		{"Queues", testQueues},
		{"DeleteQueue", testDeleteQueue},
		{"PauseAndResume", testPauseAndResume},
		{"Cancel", testCancel},
		{"Priority", testPriority},
		{"PruneDeadAndCancelled", testPruneDeadAndCancelled},
		{"Maintainer", testMaintainer},
		{"CreateQueue", testCreateQueue},
		{"CreateQueueConcurrently", testCreateQueueConcurrently},
		{"QueueRecordAndPause", testQueueRecordAndPause},
		{"SetQueueAttributes", testSetQueueAttributes},
		{"PurgeQueue", testPurgeQueue},
		{"DeleteQueueRecord", testDeleteQueueRecord},
		{"BadQueueAttributesChangeNothing", testBadQueueAttributesChangeNothing},
		{"MessageAttributes", testMessageAttributes},
		{"AttributesCountTowardThePayloadLimit", testAttributesCountTowardThePayloadLimit},
		{"FirstClaimedAt", testFirstClaimedAt},
		{"StatsDelayed", testStatsDelayed},
		{"ListFilters", testListFilters},
		{"ListFiltersBadInput", testListFiltersBadInput},
		{"Get", testGet},
		{"BlockedKeys", testBlockedKeys},
		{"QueuesOfEveryState", testQueuesOfEveryState},
		{"Linearizable", func(t *testing.T, f Factory) { testLinearizable(t, f, o) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, f) })
	}
}

// --- helpers ---

func (b *bundle) enqueue(msgs ...store.NewMessage) []int64 {
	b.t.Helper()
	for i := range msgs {
		if msgs[i].Queue == "" {
			msgs[i].Queue = b.queue
		}
	}
	res, err := b.s.Enqueue(b.ctx, msgs)
	if err != nil {
		b.t.Fatalf("Enqueue: %v", err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func (b *bundle) send(payload string) int64 {
	b.t.Helper()
	return b.enqueue(store.NewMessage{Payload: []byte(payload)})[0]
}

func (b *bundle) claim(max int) []store.Delivery {
	b.t.Helper()
	return b.claimFor(max, lease)
}

func (b *bundle) claimFor(max int, d time.Duration) []store.Delivery {
	b.t.Helper()
	ds, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: "w1", Max: max, LeaseDuration: d})
	if err != nil {
		b.t.Fatalf("Claim: %v", err)
	}
	return ds
}

func (b *bundle) claimOne() store.Delivery {
	b.t.Helper()
	ds := b.claim(1)
	if len(ds) != 1 {
		b.t.Fatalf("claimed %d messages, want 1", len(ds))
	}
	return ds[0]
}

func (b *bundle) claimNone() {
	b.t.Helper()
	if ds := b.claim(100); len(ds) != 0 {
		b.t.Fatalf("claimed %d messages (first id %d), want none", len(ds), ds[0].MessageID)
	}
}

func (b *bundle) complete(l store.Lease) error {
	b.t.Helper()
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: l}})
	if err != nil {
		b.t.Fatalf("Complete: %v", err)
	}
	return errs[0]
}

func (b *bundle) mustComplete(l store.Lease) {
	b.t.Helper()
	if err := b.complete(l); err != nil {
		b.t.Fatalf("Complete(%s): %v", l, err)
	}
}

func (b *bundle) stats() store.Stats {
	b.t.Helper()
	st, err := b.s.Stats(b.ctx, b.queue)
	if err != nil {
		b.t.Fatalf("Stats: %v", err)
	}
	return st
}

func (b *bundle) info(id int64) store.Info {
	b.t.Helper()
	for st := range store.State(store.States) {
		after := int64(0)
		for {
			infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: st, AfterID: after, Limit: 1000})
			if err != nil {
				b.t.Fatalf("List: %v", err)
			}
			for _, in := range infos {
				if in.ID == id {
					return in
				}
			}
			if len(infos) < 1000 {
				break
			}
			after = infos[len(infos)-1].ID
		}
	}
	b.t.Fatalf("message %d not listed in any state", id)
	return store.Info{}
}

func (b *bundle) wantState(id int64, want store.State) store.Info {
	b.t.Helper()
	in := b.info(id)
	if in.State != want {
		b.t.Fatalf("message %d is %s, want %s", id, in.State, want)
	}
	return in
}

func (b *bundle) reap() []store.Recovered {
	b.t.Helper()
	rs, err := b.s.Reap(b.ctx)
	if err != nil {
		b.t.Fatalf("Reap: %v", err)
	}
	return rs
}

func wantLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("%s = %v, want ErrLeaseLost", what, err)
	}
}

func ids(ds []store.Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.MessageID
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got ids %v, want %v", what, got, want)
	}
}

// --- tests ---

func testEnqueueClaimComplete(t *testing.T, f Factory) {
	b := setup(t, f)
	start := b.clk.Now()
	id := b.enqueue(store.NewMessage{Payload: []byte("hello"), Key: "k", ReplyTo: "replies", MaxDeliveries: 3})[0]
	b.clk.Advance(time.Second)
	d := b.claimOne()
	if d.MessageID != id || string(d.Payload) != "hello" || d.Key != "k" || d.ReplyTo != "replies" ||
		d.Attempt != 1 || d.MaxDeliveries != 3 || d.Queue != b.queue || d.FencingToken <= 0 {
		t.Fatalf("delivery = %+v", d)
	}
	if !d.EnqueuedAt.Equal(start) {
		t.Fatalf("EnqueuedAt = %s, want %s", d.EnqueuedAt, start)
	}
	if want := start.Add(time.Second + lease); !d.LeaseExpires.Equal(want) {
		t.Fatalf("LeaseExpires = %s, want %s", d.LeaseExpires, want)
	}
	in := b.wantState(id, store.Processing)
	if in.WorkerID != "w1" || in.FencingToken != d.FencingToken || in.Deliveries != 1 {
		t.Fatalf("listed %+v", in)
	}
	b.claimNone()
	b.mustComplete(d.Lease)
	b.wantState(id, store.Completed)
	wantLost(t, "second Complete", b.complete(d.Lease))
	b.claimNone()

	// An empty payload round-trips as empty, not nil-vs-empty noise.
	b.send("")
	if d := b.claimOne(); len(d.Payload) != 0 {
		t.Fatalf("empty payload came back as %q", d.Payload)
	}
}

func testEnqueueIsAtomic(t *testing.T, f Factory) {
	b := setup(t, f)
	_, err := b.s.Enqueue(b.ctx, []store.NewMessage{
		{Queue: b.queue, Payload: []byte("ok")},
		{Queue: "", Payload: []byte("bad")},
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Enqueue with one bad message = %v, want ErrInvalid", err)
	}
	if st := b.stats(); st.Pending != 0 {
		t.Fatalf("a failed batch enqueued %d messages", st.Pending)
	}
	got := b.enqueue(store.NewMessage{Payload: []byte("a")}, store.NewMessage{Payload: []byte("b")}, store.NewMessage{Payload: []byte("c")})
	if len(got) != 3 || !(got[0] < got[1] && got[1] < got[2]) {
		t.Fatalf("batch ids %v, want three increasing ids", got)
	}
}

func testFencing(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	old := b.claimFor(1, 10*time.Second)[0]
	b.clk.Advance(11 * time.Second)
	if rs := b.reap(); len(rs) != 1 || rs[0].ID != id {
		t.Fatalf("reap = %+v", rs)
	}
	cur := b.claimOne()
	if cur.MessageID != id || cur.FencingToken <= old.FencingToken || cur.Attempt != 2 {
		t.Fatalf("reclaim = %+v after %+v", cur, old)
	}
	before := b.info(id)

	ext, err := b.s.Extend(b.ctx, []store.Lease{old.Lease}, time.Minute)
	if err != nil || len(ext.Lost) != 1 || ext.Lost[0] != old.Lease {
		t.Fatalf("Extend(old) = %+v, %v; want the old lease lost", ext, err)
	}
	wantLost(t, "Complete(old)", b.complete(old.Lease))
	_, err = b.s.Fail(b.ctx, store.Failure{Lease: old.Lease, Error: "boom"})
	wantLost(t, "Fail(old)", err)
	wantLost(t, "Release(old)", b.s.Release(b.ctx, store.Release{Lease: old.Lease}))
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: old.Lease, Reply: &store.NewMessage{Queue: "replies", Payload: []byte("r")}}})
	if err != nil {
		t.Fatal(err)
	}
	wantLost(t, "Complete(old) with reply", errs[0])

	after := b.info(id)
	if !infoEqual(after, before) {
		t.Fatalf("stale lease changed the message:\n before %+v\n after  %+v", before, after)
	}
	if st, _ := b.s.Stats(b.ctx, "replies"); st.Pending != 0 {
		t.Fatal("a refused completion sent its reply")
	}

	if _, err := b.s.Extend(b.ctx, []store.Lease{cur.Lease}, time.Minute); err != nil {
		t.Fatal(err)
	}
	b.mustComplete(cur.Lease)
	b.wantState(id, store.Completed)
}

func infoEqual(a, b store.Info) bool {
	return a.ID == b.ID && a.State == b.State && a.Deliveries == b.Deliveries && a.FencingToken == b.FencingToken &&
		a.LastError == b.LastError && a.LeaseExpires.Equal(b.LeaseExpires) && a.VisibleAt.Equal(b.VisibleAt) &&
		a.WorkerID == b.WorkerID && string(a.Payload) == string(b.Payload)
}

func testExpiredLeaseIsLost(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	d := b.claimFor(1, 10*time.Second)[0]
	b.clk.Advance(10 * time.Second) // expired, not yet reaped
	ext, err := b.s.Extend(b.ctx, []store.Lease{d.Lease}, time.Minute)
	if err != nil || len(ext.Lost) != 1 {
		t.Fatalf("Extend of an expired lease = %+v, %v; want it lost", ext, err)
	}
	wantLost(t, "Complete of an expired lease", b.complete(d.Lease))
	b.wantState(id, store.Processing)

	// Extending before expiry keeps it alive past the first expiry.
	id2 := b.send("y")
	d2 := b.claimFor(1, 10*time.Second)[0]
	b.clk.Advance(9 * time.Second)
	if ext, err := b.s.Extend(b.ctx, []store.Lease{d2.Lease}, 10*time.Second); err != nil || len(ext.Lost) != 0 {
		t.Fatalf("Extend = %+v, %v", ext, err)
	} else if want := b.clk.Now().Add(10 * time.Second); !ext.Expires.Equal(want) {
		t.Fatalf("new expiry %s, want %s", ext.Expires, want)
	}
	b.clk.Advance(9 * time.Second)
	if rs := b.reap(); len(rs) != 1 || rs[0].ID != id {
		t.Fatalf("reap = %+v, want only the unextended message %d", rs, id)
	}
	b.mustComplete(d2.Lease)
	b.wantState(id2, store.Completed)
}

func testFencingTokensIncrease(t *testing.T, f Factory) {
	b := setup(t, f)
	b.send("x")
	b.send("y")
	seen := map[int64]bool{}  // every token minted, to check uniqueness
	last := map[int64]int64{} // message -> its last token
	for i := 0; i < 4; i++ {
		ds := b.claim(10)
		if len(ds) != 2 {
			t.Fatalf("round %d claimed %d", i, len(ds))
		}
		for _, d := range ds {
			if seen[d.FencingToken] {
				t.Fatalf("fencing token %d minted twice", d.FencingToken)
			}
			seen[d.FencingToken] = true
			if d.FencingToken <= last[d.MessageID] {
				t.Fatalf("message %d: fencing token %d after %d", d.MessageID, d.FencingToken, last[d.MessageID])
			}
			last[d.MessageID] = d.FencingToken
			if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func testDelayAndVisibility(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("later"), Delay: time.Minute})[0]
	b.claimNone()
	b.clk.Advance(59 * time.Second)
	b.claimNone()
	b.clk.Advance(time.Second)
	if d := b.claimOne(); d.MessageID != id {
		t.Fatalf("claimed %d, want %d", d.MessageID, id)
	}
}

func testClaimOrderAndBatchLimit(t *testing.T, f Factory) {
	b := setup(t, f)
	var want []int64
	for i := 0; i < 5; i++ {
		want = append(want, b.send(fmt.Sprint(i)))
	}
	got := ids(b.claim(3))
	sameIDs(t, "first claim", got, want[:3])
	got = ids(b.claim(3))
	sameIDs(t, "second claim", got, want[3:])
	// Within a batch too, the oldest visible comes first, whatever the ids.
	late := b.enqueue(store.NewMessage{Payload: []byte("late"), Delay: 2 * time.Second})[0]
	early := b.send("early")
	b.clk.Advance(3 * time.Second)
	sameIDs(t, "claim of a delayed and an undelayed message", ids(b.claim(2)), []int64{early, late})
	// Other queues are untouched.
	other, err := b.s.Claim(b.ctx, store.Claim{Queue: "other", WorkerID: "w", Max: 10, LeaseDuration: lease})
	if err != nil || len(other) != 0 {
		t.Fatalf("claim of an empty queue = %d messages, %v", len(other), err)
	}
}

func testDeliveriesCountedAtClaim(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 3})[0]
	for attempt := 1; attempt <= 2; attempt++ {
		d := b.claimFor(1, time.Second)[0]
		if d.Attempt != attempt {
			t.Fatalf("attempt %d, want %d", d.Attempt, attempt)
		}
		if in := b.info(id); in.Deliveries != attempt {
			t.Fatalf("deliveries %d right after claim %d", in.Deliveries, attempt)
		}
		b.clk.Advance(time.Second) // the worker died
		if rs := b.reap(); len(rs) != 1 || rs[0].Dead {
			t.Fatalf("reap after attempt %d = %+v", attempt, rs)
		}
	}
	b.claimFor(1, time.Second)
	b.clk.Advance(time.Second)
	rs := b.reap()
	if len(rs) != 1 || !rs[0].Dead {
		t.Fatalf("reap after the last delivery = %+v, want dead", rs)
	}
	in := b.wantState(id, store.Dead)
	if in.DeadReason != store.ReasonLeaseExpired || in.Deliveries != 3 {
		t.Fatalf("dead letter %+v, want reason lease_expired after 3 deliveries", in)
	}
}

func testFailRetriesThenDeadLetters(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 2})[0]
	d := b.claimOne()
	dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "first", RetryDelay: 10 * time.Second})
	if err != nil || dead {
		t.Fatalf("Fail = %v, %v; want a retry", dead, err)
	}
	in := b.wantState(id, store.Pending)
	if in.LastError != "first" || !in.VisibleAt.Equal(b.clk.Now().Add(10*time.Second)) {
		t.Fatalf("after a failure: %+v", in)
	}
	b.claimNone()
	b.clk.Advance(10 * time.Second)
	d = b.claimOne()
	dead, err = b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "second"})
	if err != nil || !dead {
		t.Fatalf("Fail on the last delivery = %v, %v; want dead", dead, err)
	}
	in = b.wantState(id, store.Dead)
	if in.DeadReason != store.ReasonMaxDeliveries || in.LastError != "second" {
		t.Fatalf("dead letter %+v", in)
	}
	dls, err := store.ListDeadLetters(b.ctx, b.s, b.queue, 0, 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("DeadLetters = %+v, %v", dls, err)
	}
	dl := dls[0]
	if dl.ID != id || dl.Reason != store.ReasonMaxDeliveries || dl.LastError != "second" || !dl.DeadAt.Equal(b.clk.Now()) ||
		string(dl.Payload) != "x" || dl.Deliveries != 2 {
		t.Fatalf("dead letter %+v", dl)
	}

	// A long error text is kept, cut to its end.
	b.send("y")
	d = b.claimOne()
	long := strings.Repeat("a", store.MaxErrorLength) + "the end"
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: long}); err != nil {
		t.Fatal(err)
	}
	if in := b.info(d.MessageID); len(in.LastError) != store.MaxErrorLength || !strings.HasSuffix(in.LastError, "the end") {
		t.Fatalf("recorded error of %d bytes ending %q", len(in.LastError), in.LastError[max(0, len(in.LastError)-10):])
	}
}

// A message's kind comes back with its claim and its listing, whichever
// way it was enqueued; a bad kind is refused and changes nothing.
func testKind(t *testing.T, f Factory) {
	b := setup(t, f)
	plain := b.enqueue(store.NewMessage{Payload: []byte("a"), Kind: "send_email"},
		store.NewMessage{Payload: []byte("b")})
	keyed := b.enqueue(store.NewMessage{Payload: []byte("c"), Kind: "charge", Key: "k", DedupID: "d"})[0]
	want := map[int64]string{plain[0]: "send_email", plain[1]: "", keyed: "charge"}
	for _, d := range b.claim(10) {
		if d.Kind != want[d.MessageID] {
			t.Fatalf("claimed %d with kind %q, want %q", d.MessageID, d.Kind, want[d.MessageID])
		}
	}
	infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: store.Processing})
	if err != nil || len(infos) != 3 {
		t.Fatalf("List = %d, %v", len(infos), err)
	}
	for _, in := range infos {
		if in.Kind != want[in.ID] {
			t.Fatalf("listed %d with kind %q, want %q", in.ID, in.Kind, want[in.ID])
		}
	}
	for _, bad := range []string{strings.Repeat("k", store.MaxNameLength+1), "a\x00b", "\xff"} {
		if _, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, Kind: bad}}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Enqueue with kind %q = %v, want ErrInvalid", bad, err)
		}
	}
	if st := b.stats(); st.Pending != 0 || st.Processing != 3 {
		t.Fatalf("refused enqueues changed the queue: %+v", st)
	}
}

// A failure's reply is sent when, and only when, the failure dead-letters
// the message, in the same transaction; an invalid one changes nothing.
func testFailWithReply(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("req"), Key: "k", ReplyTo: "replies", MaxDeliveries: 2})[0]
	next := b.enqueue(store.NewMessage{Payload: []byte("next"), Key: "k"})[0]
	reply := func(s string) *store.NewMessage { return &store.NewMessage{Queue: "replies", Payload: []byte(s)} }
	d := b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "first", Reply: reply("not sent")}); err != nil || dead {
		t.Fatalf("first Fail = %v, %v", dead, err)
	}
	if st, err := b.s.Stats(b.ctx, "replies"); err != nil || st.Pending != 0 {
		t.Fatalf("a retried failure sent its reply: %+v, %v", st, err)
	}
	d = b.claimOne()
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "bad", Reply: &store.NewMessage{Queue: ""}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Fail with an invalid reply = %v", err)
	}
	b.wantState(id, store.Processing)
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "second", Reply: reply("sent")}); err != nil || !dead {
		t.Fatalf("last Fail = %v, %v", dead, err)
	}
	if in := b.wantState(id, store.Dead); in.LastError != "second" {
		t.Fatalf("dead request %+v", in)
	}
	rs, err := b.s.Claim(b.ctx, store.Claim{Queue: "replies", WorkerID: "w", Max: 10, LeaseDuration: lease})
	if err != nil || len(rs) != 1 || string(rs[0].Payload) != "sent" {
		t.Fatalf("reply claim = %+v, %v", rs, err)
	}
	// The key's next message moved up as with any dead head.
	if d := b.claimOne(); d.MessageID != next {
		t.Fatalf("claimed %d after the dead head, want %d", d.MessageID, next)
	}
}

func testPermanentFailure(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	d := b.claimOne()
	dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "bad input", Permanent: true})
	if err != nil || !dead {
		t.Fatalf("permanent Fail = %v, %v", dead, err)
	}
	if in := b.wantState(id, store.Dead); in.DeadReason != store.ReasonPermanent || in.Deliveries != 1 {
		t.Fatalf("dead letter %+v", in)
	}
	b.send("y")
	d = b.claimOne()
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Permanent: true, Reason: store.ReasonMaxProcessingTime}); err != nil {
		t.Fatal(err)
	}
	if in := b.info(d.MessageID); in.DeadReason != store.ReasonMaxProcessingTime {
		t.Fatalf("reason %q, want the one given", in.DeadReason)
	}
}

func testReleaseAndUncount(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	d := b.claimOne()
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Delay: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(id, store.Pending); in.Deliveries != 1 {
		t.Fatalf("a counted release left %d deliveries, want 1", in.Deliveries)
	}
	b.claimNone()
	b.clk.Advance(5 * time.Second)
	d = b.claimOne()
	if d.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", d.Attempt)
	}
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Uncount: true}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(id, store.Pending); in.Deliveries != 1 {
		t.Fatalf("an uncounted release left %d deliveries, want 1", in.Deliveries)
	}
	if d := b.claimOne(); d.Attempt != 2 {
		t.Fatalf("attempt after an uncounted release %d, want 2", d.Attempt)
	}
}

func testCountedReleaseUsesTheBudget(t *testing.T, f Factory) {
	b := setup(t, f)
	ids := b.enqueue(store.NewMessage{MaxDeliveries: 2, Key: "k"}, store.NewMessage{Key: "k"})
	d := b.claimOne()
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(ids[0], store.Pending); in.LastError != store.ReleasedError {
		t.Fatalf("last error after a counted release %q, want %q", in.LastError, store.ReleasedError)
	}
	d = b.claimOne()
	if d.MessageID != ids[0] || d.Attempt != 2 {
		t.Fatalf("claimed %d attempt %d, want %d attempt 2", d.MessageID, d.Attempt, ids[0])
	}
	// Released on its last delivery: dead, and the key moves on.
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease}); err != nil {
		t.Fatal(err)
	}
	if in := b.wantState(ids[0], store.Dead); in.DeadReason != store.ReasonMaxDeliveries || in.Deliveries != 2 {
		t.Fatalf("released on its last delivery: %s after %d deliveries", in.DeadReason, in.Deliveries)
	}
	if d := b.claimOne(); d.MessageID != ids[1] {
		t.Fatalf("claimed %d, want the next of the key, %d", d.MessageID, ids[1])
	}
}

func (b *bundle) killOne(id int64) {
	b.t.Helper()
	d := b.claimOne()
	if d.MessageID != id {
		b.t.Fatalf("claimed %d, want %d", d.MessageID, id)
	}
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "fatal", Permanent: true}); err != nil || !dead {
		b.t.Fatalf("Fail = %v, %v", dead, err)
	}
}

func testRedriveAndPurge(t *testing.T, f Factory) {
	b := setup(t, f)
	a, c, keep := b.send("a"), b.send("c"), b.send("keep")
	b.killOne(a)
	b.killOne(c)
	live := b.claimOne()
	if live.MessageID != keep {
		t.Fatalf("claimed %d", live.MessageID)
	}

	// Ids that are not dead letters of the queue: an error, nothing moved.
	for _, bad := range [][]int64{{keep}, {a, 999999}} {
		if _, err := b.s.Redrive(b.ctx, b.queue, bad); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Redrive(%v) = %v, want ErrNotFound", bad, err)
		}
		if _, err := b.s.Purge(b.ctx, b.queue, bad); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Purge(%v) = %v, want ErrNotFound", bad, err)
		}
	}
	if _, err := b.s.Redrive(b.ctx, b.queue, []int64{a, a}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Redrive with an id listed twice = %v, want ErrInvalid", err)
	}
	if _, err := b.s.Purge(b.ctx, b.queue, []int64{c, c}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Purge with an id listed twice = %v, want ErrInvalid", err)
	}
	if st := b.stats(); st.Dead != 2 || st.Processing != 1 {
		t.Fatalf("stats after refused calls %+v", st)
	}

	n, err := b.s.Redrive(b.ctx, b.queue, []int64{a})
	if err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	if in := b.wantState(a, store.Pending); in.Deliveries != 0 {
		t.Fatalf("redriven message has %d deliveries, want a fresh budget", in.Deliveries)
	}
	if d := b.claimOne(); d.MessageID != a || d.Attempt != 1 {
		t.Fatalf("claimed %+v after redrive", d)
	}
	n, err = b.s.Purge(b.ctx, b.queue, nil)
	if err != nil || n != 1 {
		t.Fatalf("Purge all = %d, %v", n, err)
	}
	if st := b.stats(); st.Dead != 0 || st.Processing != 2 {
		t.Fatalf("stats after purge %+v", st)
	}
	if dls, _ := store.ListDeadLetters(b.ctx, b.s, b.queue, 0, 10); len(dls) != 0 {
		t.Fatalf("dead letters after purge: %+v", dls)
	}
}

func testDedup(t *testing.T, f Factory) {
	b := setup(t, f)
	first := b.enqueue(store.NewMessage{Payload: []byte("1"), DedupID: "order-7"})[0]
	res, err := b.s.Enqueue(b.ctx, []store.NewMessage{
		{Queue: b.queue, Payload: []byte("2"), DedupID: "order-7"},
		{Queue: b.queue, Payload: []byte("3"), DedupID: "order-8"},
		{Queue: "elsewhere", Payload: []byte("4"), DedupID: "order-7"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].ID != first {
		t.Fatalf("duplicate enqueue = %+v, want the first id %d", res[0], first)
	}
	if res[1].Duplicate || res[2].Duplicate || res[2].ID == first {
		t.Fatalf("distinct dedup ids or queues were treated as duplicates: %+v", res)
	}
	if st := b.stats(); st.Pending != 2 {
		t.Fatalf("pending %d, want 2", st.Pending)
	}

	// Still a duplicate after the first completed, within the window.
	for _, d := range b.claim(10) {
		b.mustComplete(d.Lease)
	}
	b.clk.Advance(store.DefaultDedupWindow - time.Second)
	again := b.enqueue(store.NewMessage{Payload: []byte("5"), DedupID: "order-7"})
	if again[0] != first {
		t.Fatalf("enqueue after completion, inside the window, got id %d, want %d", again[0], first)
	}
	b.claimNone()

	// Past the window it is a new message.
	b.clk.Advance(time.Second)
	fresh, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, Payload: []byte("6"), DedupID: "order-7"}})
	if err != nil || fresh[0].Duplicate || fresh[0].ID == first {
		t.Fatalf("enqueue past the window = %+v, %v; want a new message", fresh, err)
	}
	if d := b.claimOne(); string(d.Payload) != "6" {
		t.Fatalf("claimed %q", d.Payload)
	}
	// And the new one deduplicates from now on.
	if r := b.enqueue(store.NewMessage{Payload: []byte("7"), DedupID: "order-7"}); r[0] != fresh[0].ID {
		t.Fatalf("dedup now points at %d, want %d", r[0], fresh[0].ID)
	}
}

func testReaper(t *testing.T, f Factory) {
	b := setup(t, f)
	short := b.send("short")
	long := b.send("long")
	b.claimFor(1, 10*time.Second)
	b.claimFor(1, time.Minute)
	if rs := b.reap(); len(rs) != 0 {
		t.Fatalf("reap before expiry = %+v", rs)
	}
	b.clk.Advance(15 * time.Second)
	rs := b.reap()
	if len(rs) != 1 || rs[0].ID != short || rs[0].Dead || rs[0].Queue != b.queue || rs[0].StuckFor != 5*time.Second {
		t.Fatalf("reap = %+v, want message %d stuck for 5s", rs, short)
	}
	if rs := b.reap(); len(rs) != 0 {
		t.Fatalf("second reap = %+v, want nothing (idempotent)", rs)
	}
	b.wantState(short, store.Pending)
	b.wantState(long, store.Processing)
	if d := b.claimOne(); d.MessageID != short || d.Attempt != 2 {
		t.Fatalf("reclaimed %+v", d)
	}
}

func testConcurrentReapers(t *testing.T, f Factory) {
	b := setup(t, f)
	const n = 50
	for i := 0; i < n; i++ {
		b.send(fmt.Sprint(i))
	}
	if got := len(b.claimFor(n, time.Second)); got != n {
		t.Fatalf("claimed %d", got)
	}
	b.clk.Advance(time.Second)
	var wg sync.WaitGroup
	results := make([][]store.Recovered, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = b.s.Reap(b.ctx)
		}()
	}
	wg.Wait()
	seen := map[int64]int{}
	for i, rs := range results {
		if errs[i] != nil {
			t.Fatalf("reaper %d: %v", i, errs[i])
		}
		for _, r := range rs {
			seen[r.ID]++
		}
	}
	if len(seen) != n {
		t.Fatalf("reapers recovered %d distinct messages, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("message %d recovered %d times", id, c)
		}
	}
	if st := b.stats(); st.Pending != n || st.Processing != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func testReaperDeadLettersExhausted(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 1})[0]
	b.claimFor(1, time.Second)
	b.clk.Advance(2 * time.Second)
	rs := b.reap()
	if len(rs) != 1 || !rs[0].Dead || rs[0].StuckFor != time.Second {
		t.Fatalf("reap = %+v", rs)
	}
	if in := b.wantState(id, store.Dead); in.DeadReason != store.ReasonLeaseExpired {
		t.Fatalf("reason %q", in.DeadReason)
	}
}

func testKeyFIFO(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(
		store.NewMessage{Payload: []byte("k1"), Key: "K"},
		store.NewMessage{Payload: []byte("k2"), Key: "K"},
		store.NewMessage{Payload: []byte("free")},
		store.NewMessage{Payload: []byte("l1"), Key: "L"},
		store.NewMessage{Payload: []byte("k3"), Key: "K"},
	)
	if st := b.stats(); st.Pending != 3 || st.Waiting != 2 || st.BlockedKeys != 1 {
		t.Fatalf("stats %+v, want 3 pending, 2 waiting behind 1 blocked key", st)
	}
	b.wantState(k[1], store.Waiting)
	ds := b.claim(10)
	sameIDs(t, "first claim", ids(ds), []int64{k[0], k[2], k[3]})
	b.claimNone()
	// Completing the head lets exactly the next one go.
	b.mustComplete(ds[0].Lease)
	d := b.claimOne()
	if d.MessageID != k[1] {
		t.Fatalf("after k1 completed, claimed %d, want k2 (%d)", d.MessageID, k[1])
	}
	b.claimNone()
	b.mustComplete(d.Lease)
	if d := b.claimOne(); d.MessageID != k[4] {
		t.Fatalf("claimed %d, want k3", d.MessageID)
	}
	if st := b.stats(); st.Waiting != 0 || st.BlockedKeys != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A key seen again after its line emptied starts a new line.
	b.mustComplete(ds[2].Lease)
	again := b.enqueue(store.NewMessage{Payload: []byte("l2"), Key: "L"})
	if d := b.claimOne(); d.MessageID != again[0] {
		t.Fatalf("claimed %d, want the new head of L", d.MessageID)
	}
}

func testKeyRetryingHeadBlocks(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(store.NewMessage{Payload: []byte("k1"), Key: "K", MaxDeliveries: 3}, store.NewMessage{Payload: []byte("k2"), Key: "K"})
	d := b.claimOne()
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "try again", RetryDelay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(30 * time.Second)
	b.claimNone() // k2 stays behind its retrying head
	if st := b.stats(); st.BlockedKeys != 1 {
		t.Fatalf("blocked keys %d, want 1", st.BlockedKeys)
	}
	b.clk.Advance(30 * time.Second)
	if d := b.claimOne(); d.MessageID != k[0] || d.Attempt != 2 {
		t.Fatalf("claimed %+v, want the retried head", d)
	}
	// A lease that expires also keeps the key blocked.
	b.clk.Advance(lease)
	b.reap()
	if d := b.claimOne(); d.MessageID != k[0] {
		t.Fatalf("claimed %d after reap, want the head again", d.MessageID)
	}
}

func testKeyDeadHeadUnblocks(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(store.NewMessage{Payload: []byte("k1"), Key: "K", MaxDeliveries: 1}, store.NewMessage{Payload: []byte("k2"), Key: "K"})
	d := b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "no"}); err != nil || !dead {
		t.Fatalf("Fail = %v, %v", dead, err)
	}
	if d := b.claimOne(); d.MessageID != k[1] {
		t.Fatalf("claimed %d, want k2 once k1 is dead", d.MessageID)
	}
	// The reaper's dead-lettering unblocks too.
	k3 := b.enqueue(store.NewMessage{Payload: []byte("m1"), Key: "M", MaxDeliveries: 1}, store.NewMessage{Payload: []byte("m2"), Key: "M"})
	b.claimFor(1, time.Second)
	b.clk.Advance(time.Second)
	if rs := b.reap(); len(rs) != 1 || !rs[0].Dead {
		t.Fatalf("reap = %+v", rs)
	}
	if d := b.claimOne(); d.MessageID != k3[1] {
		t.Fatalf("claimed %d, want m2", d.MessageID)
	}
}

func testKeyRedriveWaitsBehindHead(t *testing.T, f Factory) {
	b := setup(t, f)
	k := b.enqueue(store.NewMessage{Payload: []byte("k1"), Key: "K"}, store.NewMessage{Payload: []byte("k2"), Key: "K"}, store.NewMessage{Payload: []byte("k3"), Key: "K"})
	b.killOne(k[0])
	head := b.claimOne()
	if head.MessageID != k[1] {
		t.Fatalf("claimed %d", head.MessageID)
	}
	if _, err := b.s.Redrive(b.ctx, b.queue, nil); err != nil {
		t.Fatal(err)
	}
	// k1 is back but must not run beside the in-flight k2; it runs next.
	b.wantState(k[0], store.Waiting)
	b.claimNone()
	b.mustComplete(head.Lease)
	if d := b.claimOne(); d.MessageID != k[0] {
		t.Fatalf("claimed %d, want the redriven k1 (oldest)", d.MessageID)
	}
}

// An enqueue closes the queue's wake-up channel at once, without any
// clock time passing: a receiver that long-polls waits on it.
func testWakeupOnEnqueue(t *testing.T, f Factory) {
	b := setup(t, f)
	wake := b.s.Wakeup(b.queue)
	id := b.send("wake up")
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("an enqueue did not wake its queue")
	}
	if b.clk.Monotonic() != 0 {
		t.Fatalf("the wake-up needed %s of clock time", b.clk.Monotonic())
	}
	if d := b.claimOne(); d.MessageID != id {
		t.Fatalf("claimed %d after the wake-up, want %d", d.MessageID, id)
	}
}

func testBatchExtendReportsLost(t *testing.T, f Factory) {
	b := setup(t, f)
	for i := 0; i < 4; i++ {
		b.send(fmt.Sprint(i))
	}
	ds := b.claim(4)
	b.mustComplete(ds[1].Lease)
	if err := b.s.Release(b.ctx, store.Release{Lease: ds[3].Lease}); err != nil {
		t.Fatal(err)
	}
	bogus := store.Lease{MessageID: ds[0].MessageID, FencingToken: ds[0].FencingToken + 1000}
	leases := []store.Lease{ds[0].Lease, ds[1].Lease, ds[2].Lease, ds[3].Lease, bogus, {MessageID: 987654, FencingToken: 1}}
	res, err := b.s.Extend(b.ctx, leases, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[store.Lease]bool{}
	for _, l := range res.Lost {
		lost[l] = true
	}
	want := []store.Lease{ds[1].Lease, ds[3].Lease, bogus, {MessageID: 987654, FencingToken: 1}}
	if len(res.Lost) != len(want) {
		t.Fatalf("lost %v, want %v", res.Lost, want)
	}
	for _, l := range want {
		if !lost[l] {
			t.Fatalf("lost %v, want %v", res.Lost, want)
		}
	}
	if in := b.info(ds[0].MessageID); !in.LeaseExpires.Equal(b.clk.Now().Add(time.Hour)) {
		t.Fatalf("extended lease expires %s", in.LeaseExpires)
	}
	if res, err := b.s.Extend(b.ctx, nil, time.Hour); err != nil || len(res.Lost) != 0 || !res.Expires.Equal(b.clk.Now().Add(time.Hour)) {
		t.Fatalf("empty Extend = %+v, %v", res, err)
	}
	if res, err := b.s.Extend(b.ctx, []store.Lease{bogus}, time.Minute); err != nil || len(res.Lost) != 1 || !res.Expires.Equal(b.clk.Now().Add(time.Minute)) {
		t.Fatalf("Extend of a lost lease = %+v, %v; want it lost and the expiry reported", res, err)
	}
}

func testCompleteBatchPerMessage(t *testing.T, f Factory) {
	b := setup(t, f)
	for i := 0; i < 3; i++ {
		b.send(fmt.Sprint(i))
	}
	ds := b.claim(3)
	stale := store.Lease{MessageID: ds[1].MessageID, FencingToken: ds[1].FencingToken - 1}
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: ds[0].Lease}, {Lease: stale}, {Lease: ds[2].Lease}})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("valid completions failed: %v", errs)
	}
	wantLost(t, "stale completion", errs[1])
	b.wantState(ds[1].MessageID, store.Processing)
	if st := b.stats(); st.Completed != 2 || st.Processing != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func testCompleteWithReply(t *testing.T, f Factory) {
	b := setup(t, f)
	b.enqueue(store.NewMessage{Payload: []byte("ping"), ReplyTo: "replies"})
	req := b.claimOne()
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: req.Lease, Reply: &store.NewMessage{Queue: req.ReplyTo, Payload: []byte("pong")}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Complete with a reply = %v, %v", errs, err)
	}
	rs, err := b.s.Claim(b.ctx, store.Claim{Queue: "replies", WorkerID: "w", Max: 10, LeaseDuration: lease})
	if err != nil || len(rs) != 1 || string(rs[0].Payload) != "pong" {
		t.Fatalf("reply claim = %+v, %v", rs, err)
	}
	// A reply that is invalid fails the whole call, and the message stays.
	b.send("again")
	d := b.claimOne()
	_, err = b.s.Complete(b.ctx, []store.Completion{{Lease: d.Lease, Reply: &store.NewMessage{Queue: ""}}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Complete with an invalid reply = %v", err)
	}
	b.wantState(d.MessageID, store.Processing)
}

func testConcurrentReceivers(t *testing.T, f Factory) {
	b := setup(t, f)
	const total, workers = 300, 6
	var batch []store.NewMessage
	for i := 0; i < total; i++ {
		m := store.NewMessage{Payload: []byte(fmt.Sprint(i))}
		if i%3 == 0 {
			m.Key = fmt.Sprintf("k%d", i%12)
		}
		batch = append(batch, m)
	}
	b.enqueue(batch...)

	// A key's entry is its message in flight; completing is set once that
	// message's Complete has begun, after which the next message of the key
	// may legitimately be claimed before Complete returns.
	type inFlight struct {
		id         int64
		completing bool
	}
	var mu sync.Mutex
	holding := map[int64]string{} // message -> worker holding it now
	keyHeld := map[string]*inFlight{}
	lastOfKey := map[string]int64{} // the last claimed message of each key
	done := map[int64]int{}
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := fmt.Sprintf("w%d", w)
			for {
				ds, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: me, Max: 7, LeaseDuration: time.Hour})
				if err != nil {
					errc <- err
					return
				}
				if len(ds) == 0 {
					mu.Lock()
					finished := len(done) == total
					mu.Unlock()
					if finished {
						return
					}
					continue
				}
				mu.Lock()
				for _, d := range ds {
					if other, ok := holding[d.MessageID]; ok {
						mu.Unlock()
						errc <- fmt.Errorf("message %d held by %s and %s at once", d.MessageID, other, me)
						return
					}
					holding[d.MessageID] = me
					if d.Key == "" {
						continue
					}
					if prev, ok := keyHeld[d.Key]; ok && !prev.completing {
						mu.Unlock()
						errc <- fmt.Errorf("key %s has messages %d and %d in flight at once", d.Key, prev.id, d.MessageID)
						return
					}
					if d.MessageID <= lastOfKey[d.Key] {
						mu.Unlock()
						errc <- fmt.Errorf("key %s: message %d claimed after %d, out of enqueue order", d.Key, d.MessageID, lastOfKey[d.Key])
						return
					}
					lastOfKey[d.Key] = d.MessageID
					keyHeld[d.Key] = &inFlight{id: d.MessageID}
				}
				cs := make([]store.Completion, len(ds))
				for i, d := range ds {
					cs[i] = store.Completion{Lease: d.Lease}
					if d.Key != "" {
						keyHeld[d.Key].completing = true
					}
				}
				mu.Unlock()
				res, err := b.s.Complete(b.ctx, cs)
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				for i, d := range ds {
					if res[i] != nil {
						mu.Unlock()
						errc <- fmt.Errorf("complete %s: %w", cs[i].Lease, res[i])
						return
					}
					delete(holding, d.MessageID)
					if e, ok := keyHeld[d.Key]; ok && e.id == d.MessageID {
						delete(keyHeld, d.Key)
					}
					done[d.MessageID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for id, n := range done {
		if n != 1 {
			t.Fatalf("message %d completed %d times", id, n)
		}
	}
	if st := b.stats(); st.Completed != total {
		t.Fatalf("completed %d of %d", st.Completed, total)
	}
}

func testBadInputChangesNothing(t *testing.T, f Factory) {
	b := setup(t, f)
	b.send("x")
	d := b.claimOne()
	before := b.stats()
	ctx := b.ctx
	s := b.s
	long := strings.Repeat("q", store.MaxNameLength+1)
	big := make([]byte, store.DefaultPayloadLimit+1)
	cases := map[string]func() error{
		"empty queue":            func() error { _, err := s.Enqueue(ctx, []store.NewMessage{{Payload: []byte("x")}}); return err },
		"over-long queue":        func() error { _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: long}}); return err },
		"payload over the limit": func() error { _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, Payload: big}}); return err },
		"negative delay": func() error {
			_, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, Delay: -time.Second}})
			return err
		},
		"negative max deliveries": func() error {
			_, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, MaxDeliveries: -1}})
			return err
		},
		"over-long key": func() error { _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, Key: long}}); return err },
		"no messages":   func() error { _, err := s.Enqueue(ctx, nil); return err },
		"claim of zero": func() error {
			_, err := s.Claim(ctx, store.Claim{Queue: b.queue, Max: 0, LeaseDuration: lease})
			return err
		},
		"claim bad queue": func() error { _, err := s.Claim(ctx, store.Claim{Queue: "", Max: 1, LeaseDuration: lease}); return err },
		"zero lease":      func() error { _, err := s.Claim(ctx, store.Claim{Queue: b.queue, Max: 1}); return err },
		"negative lease": func() error {
			_, err := s.Claim(ctx, store.Claim{Queue: b.queue, Max: 1, LeaseDuration: -time.Second})
			return err
		},
		"lease under 1ms": func() error {
			_, err := s.Claim(ctx, store.Claim{Queue: b.queue, Max: 1, LeaseDuration: 999 * time.Microsecond})
			return err
		},
		"zero extension":       func() error { _, err := s.Extend(ctx, []store.Lease{d.Lease}, 0); return err },
		"negative retry delay": func() error { _, err := s.Fail(ctx, store.Failure{Lease: d.Lease, RetryDelay: -1}); return err },
		"negative release delay": func() error {
			return s.Release(ctx, store.Release{Lease: d.Lease, Delay: -time.Second})
		},
		"negative retention": func() error {
			_, err := s.Prune(ctx, store.Prune{State: store.Completed, OlderThan: -time.Second, Limit: 10})
			return err
		},
		"zero prune batch": func() error {
			_, err := s.Prune(ctx, store.Prune{State: store.Completed, OlderThan: time.Second})
			return err
		},
		"prune pending": func() error {
			_, err := s.Prune(ctx, store.Prune{State: store.Pending, Limit: 10})
			return err
		},
		"stats bad queue": func() error { _, err := s.Stats(ctx, ""); return err },
		"list bad limit":  func() error { _, err := s.List(ctx, store.ListFilter{Queue: b.queue, Limit: -1}); return err },
		"list bad state":  func() error { _, err := s.List(ctx, store.ListFilter{Queue: b.queue, State: 9}); return err },
		"max deliveries over the limit": func() error {
			_, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, MaxDeliveries: store.MaxDeliveriesLimit + 1}})
			return err
		},
	}
	for name, call := range cases {
		if err := call(); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	// An unknown lease is not bad input but a lost lease.
	unknown := store.Lease{MessageID: 424242, FencingToken: 7}
	wantLost(t, "Complete(unknown)", b.complete(unknown))
	wantLost(t, "Release(unknown)", s.Release(ctx, store.Release{Lease: unknown}))
	if after := b.stats(); after != before {
		t.Fatalf("bad input changed the queue: %+v -> %+v", before, after)
	}
	b.mustComplete(d.Lease)
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

func testRetention(t *testing.T, f Factory) {
	b := setup(t, f)
	for i := 0; i < 5; i++ {
		b.enqueue(store.NewMessage{Payload: []byte("x"), DedupID: fmt.Sprint("d", i)})
	}
	for _, d := range b.claim(5) {
		b.mustComplete(d.Lease)
	}
	if n, err := b.prune(store.Completed, time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("Prune inside retention = %d, %v", n, err)
	}
	// Past the retention but inside the dedup window: kept, to dedup.
	b.clk.Advance(store.DefaultDedupWindow - time.Second)
	if n, err := b.prune(store.Completed, time.Second, 100); err != nil || n != 0 {
		t.Fatalf("Prune inside the dedup window = %d, %v", n, err)
	}
	b.clk.Advance(time.Second)
	var total int
	for {
		n, err := b.prune(store.Completed, time.Second, 2)
		if err != nil {
			t.Fatal(err)
		}
		if n > 2 {
			t.Fatalf("deleted %d in a batch of 2", n)
		}
		total += n
		if n < 2 {
			break
		}
	}
	if total != 5 {
		t.Fatalf("deleted %d, want 5", total)
	}
	if st := b.stats(); st.Completed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: store.Completed}); err != nil || len(infos) != 0 {
		t.Fatalf("completed messages listed after retention: %d, %v", len(infos), err)
	}
}

// prune prunes the suite's queue.
func (b *bundle) prune(state store.State, olderThan time.Duration, limit int) (int, error) {
	return b.s.Prune(b.ctx, store.Prune{Queue: b.queue, State: state, OlderThan: olderThan, Limit: limit})
}

func testPingAndClose(t *testing.T, f Factory) {
	b := setup(t, f)
	if err := b.s.Ping(b.ctx); err != nil {
		t.Fatalf("Ping on an open store: %v", err)
	}
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Ping(b.ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Ping after Close = %v, want ErrClosed", err)
	}
	if _, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: "w", Max: 1, LeaseDuration: lease}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Claim after Close = %v, want ErrClosed", err)
	}
}

func testQueues(t *testing.T, f Factory) {
	b := setup(t, f)
	if qs, err := b.s.Queues(b.ctx); err != nil || len(qs) != 0 {
		t.Fatalf("Queues of an empty store = %v, %v", qs, err)
	}
	b.enqueue(store.NewMessage{Queue: "b"}, store.NewMessage{Queue: "a"}, store.NewMessage{Queue: "b"})
	qs, err := b.s.Queues(b.ctx)
	if err != nil || !slices.Equal(qs, []string{"a", "b"}) {
		t.Fatalf("Queues = %v, %v; want [a b]", qs, err)
	}
	// A paused queue is listed while it is paused, messages or not.
	if err := b.s.Pause(b.ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if qs, err := b.s.Queues(b.ctx); err != nil || !slices.Equal(qs, []string{"a", "b", "c"}) {
		t.Fatalf("Queues with c paused = %v, %v; want [a b c]", qs, err)
	}
	if err := b.s.Resume(b.ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if qs, err := b.s.Queues(b.ctx); err != nil || !slices.Equal(qs, []string{"a", "b"}) {
		t.Fatalf("Queues with c resumed = %v, %v; want [a b]", qs, err)
	}
}

func testDeleteQueue(t *testing.T, f Factory) {
	b := setup(t, f)
	b.enqueue(store.NewMessage{Key: "k"}, store.NewMessage{Key: "k"}, store.NewMessage{DedupID: "d"}, store.NewMessage{Queue: "other"})
	ds := b.claim(1)
	if len(ds) != 1 {
		t.Fatalf("claimed %d", len(ds))
	}
	if err := b.s.Pause(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	n, err := b.s.DeleteQueue(b.ctx, b.queue)
	if err != nil || n != 3 {
		t.Fatalf("DeleteQueue = %d, %v; want 3", n, err)
	}
	if st, err := b.s.Stats(b.ctx, b.queue); err != nil || st != (store.Stats{Queue: b.queue}) {
		t.Fatalf("stats after DeleteQueue: %+v, %v", st, err)
	}
	if st, _ := b.s.Stats(b.ctx, "other"); st.Pending != 1 {
		t.Fatalf("another queue lost messages: %+v", st)
	}
	errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: ds[0].Lease}})
	if err != nil || !errors.Is(errs[0], store.ErrLeaseLost) {
		t.Fatalf("completing a deleted message: %v, %v; want ErrLeaseLost", errs, err)
	}
	// The queue works again, dedup ids and keys forgotten.
	b.enqueue(store.NewMessage{Key: "k"}, store.NewMessage{DedupID: "d"})
	if got := b.claim(10); len(got) != 2 {
		t.Fatalf("claimed %d after re-enqueueing, want 2", len(got))
	}
	if _, err := b.s.DeleteQueue(b.ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("DeleteQueue of an empty name: %v", err)
	}
}

func testAnyErrorTextIsRecorded(t *testing.T, f Factory) {
	b := setup(t, f)
	id := b.send("x")
	d := b.claimOne()
	text := "bad \xff byte, a NUL \x00 and " + strings.Repeat("é", 3000)
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: text}); err != nil {
		t.Fatalf("Fail with an arbitrary error text: %v", err)
	}
	in := b.wantState(id, store.Pending)
	if !utf8.ValidString(in.LastError) || strings.ContainsRune(in.LastError, 0) || len(in.LastError) > store.MaxErrorLength {
		t.Fatalf("recorded error is not clean UTF-8 within %d bytes: %d bytes", store.MaxErrorLength, len(in.LastError))
	}
	if !strings.HasSuffix(in.LastError, "éé") {
		t.Fatal("the error's tail was not kept")
	}
}

// CheckUpgraded checks a store opened on a database that the previous
// schema version wrote, holding in queue a two completed messages and one
// pending, and in queue b one completed: the counts survive the upgrade,
// stay right as messages complete and queues go, and new messages carry a
// kind.
func CheckUpgraded(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	want := func(queue string, completed, pending int64) {
		t.Helper()
		st, err := s.Stats(ctx, queue)
		if err != nil || st.Completed != completed || st.Pending != pending {
			t.Fatalf("stats of %s: %+v, %v; want %d completed, %d pending", queue, st, err, completed, pending)
		}
	}
	want("a", 2, 1)
	want("b", 1, 0)
	ds, err := s.Claim(ctx, store.Claim{Queue: "a", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %v, %v", ds, err)
	}
	if errs, err := s.Complete(ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil || errs[0] != nil {
		t.Fatalf("complete: %v, %v", errs, err)
	}
	want("a", 3, 0)
	// Messages written after the upgrade carry a kind.
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "a", Kind: "send_email"}}); err != nil {
		t.Fatal(err)
	}
	if infos, err := s.List(ctx, store.ListFilter{Queue: "a", State: store.Pending}); err != nil || len(infos) != 1 || infos[0].Kind != "send_email" {
		t.Fatalf("after the upgrade: %+v, %v", infos, err)
	}
	if _, err := s.DeleteQueue(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	want("a", 0, 0)
	want("b", 1, 0)
	// A queue can be paused after the upgrade.
	if err := s.Pause(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx, "b"); err != nil || !st.Paused {
		t.Fatalf("stats of a paused queue after the upgrade: %+v, %v", st, err)
	}
	// And a message written before it can be cancelled.
	infos, err := s.List(ctx, store.ListFilter{Queue: "b", State: store.Completed})
	if err != nil || len(infos) != 1 {
		t.Fatalf("list of b: %v, %v", infos, err)
	}
	if ids, err := s.Cancel(ctx, "b", []int64{infos[0].ID}); err != nil || len(ids) != 0 {
		t.Fatalf("cancel of a completed message after the upgrade: %v, %v; want nothing cancelled", ids, err)
	}
	res, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Cancel(ctx, "b", []int64{res[0].ID}); err != nil || len(ids) != 1 {
		t.Fatalf("cancel after the upgrade: %v, %v", ids, err)
	}
	if st, err := s.Stats(ctx, "b"); err != nil || st.Cancelled != 1 {
		t.Fatalf("stats after a cancel after the upgrade: %+v, %v", st, err)
	}
	// A message written before it has no attributes and was never claimed
	// since; one written after carries attributes and its first claim.
	if infos[0].Attributes != nil || !infos[0].FirstClaimedAt.IsZero() {
		t.Fatalf("a message written before the upgrade: %+v; want no attributes, no first claim", infos[0])
	}
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "c", Attributes: []byte("attrs")}}); err != nil {
		t.Fatal(err)
	}
	ds, err = s.Claim(ctx, store.Claim{Queue: "c", WorkerID: "w", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ds) != 1 || string(ds[0].Attributes) != "attrs" || ds[0].FirstClaimedAt.IsZero() {
		t.Fatalf("claim after the upgrade: %+v, %v; want the attributes and the first claim's time", ds, err)
	}
	// The paused queue b, which has a row of settings, takes a record, and
	// the queue that only held messages has none.
	info, made, err := s.CreateQueue(ctx, "b", map[string]string{"A": "1"})
	if err != nil || !made || !info.Paused || info.Attributes["A"] != "1" {
		t.Fatalf("CreateQueue of a queue paused before the upgrade's record: %+v, %v, %v", info, made, err)
	}
	if _, err := s.QueueInfo(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo of a queue never created, after the upgrade: %v, want ErrNotFound", err)
	}
}
