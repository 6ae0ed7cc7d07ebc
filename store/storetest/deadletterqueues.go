package storetest

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// get reads a message of any queue by id.
func (b *bundle) get(id int64) store.Info {
	b.t.Helper()
	in, err := b.s.Get(b.ctx, id)
	if err != nil {
		b.t.Fatalf("Get(%d): %v", id, err)
	}
	return in
}

func (b *bundle) statsOf(queue string) store.Stats {
	b.t.Helper()
	st, err := b.s.Stats(b.ctx, queue)
	if err != nil {
		b.t.Fatalf("Stats(%s): %v", queue, err)
	}
	return st
}

func (b *bundle) claimMany(queue string, max int) []store.Delivery {
	b.t.Helper()
	ds, err := b.s.Claim(b.ctx, store.Claim{Queue: queue, WorkerID: "w1", Max: max, LeaseDuration: lease})
	if err != nil {
		b.t.Fatalf("Claim(%s): %v", queue, err)
	}
	return ds
}

// record gives queues records: messages move only into queues that
// have one.
func (b *bundle) record(queues ...string) {
	b.t.Helper()
	for _, q := range queues {
		if _, _, err := b.s.CreateQueue(b.ctx, q, nil); err != nil {
			b.t.Fatalf("CreateQueue(%s): %v", q, err)
		}
	}
}

// wantArrived checks that message id arrived in queue to as a dead
// letter of from would, with what it had when it was enqueued as was,
// and the deliveries and first claim it had when it died: a dead letter
// keeps them, as Amazon SQS keeps its receive count.
func (b *bundle) wantArrived(id int64, was store.Info, to, from string, state store.State, deliveries int, firstClaim time.Time) store.Info {
	b.t.Helper()
	in := b.get(id)
	switch {
	case in.Queue != to || in.State != state:
		b.t.Fatalf("message %d is %s in %q, want %s in %q", id, in.State, in.Queue, state, to)
	case in.DeadLetterSource != from:
		b.t.Fatalf("message %d's dead-letter source is %q, want %q", id, in.DeadLetterSource, from)
	case !bytes.Equal(in.Payload, was.Payload) || !bytes.Equal(in.Attributes, was.Attributes) || in.Key != was.Key ||
		in.Kind != was.Kind || in.Priority != was.Priority || !in.EnqueuedAt.Equal(was.EnqueuedAt):
		b.t.Fatalf("message %d arrived as %+v; it was %+v", id, in, was)
	case in.Deliveries != deliveries || !in.FirstClaimedAt.Equal(firstClaim):
		b.t.Fatalf("message %d arrived with deliveries %d, first claim %s; want those it died with, %d and %s",
			id, in.Deliveries, in.FirstClaimedAt, deliveries, firstClaim)
	case in.DedupID != "" || !in.FinishedAt.IsZero():
		b.t.Fatalf("message %d arrived with dedup id %q, finish %s; want a new message's", id, in.DedupID, in.FinishedAt)
	case !in.VisibleAt.Equal(b.clk.Now()):
		b.t.Fatalf("message %d is visible at %s, want now (%s)", id, in.VisibleAt, b.clk.Now())
	}
	return in
}

// A message with a dead-letter queue that fails on its last delivery
// moves there, whole, in the failure's transaction: a new message of the
// queue with no dedup id, its deliveries and first claim kept (its next
// claim there is its third attempt), remembering where it came from; its key's next message goes on in the old queue, and in the new
// one it waits behind its key's head. No old lease reaches it.
func testDeadLetterQueueOnFail(t *testing.T, f Factory) {
	b := setup(t, f)
	b.queue = "src"
	b.record("dlq")
	head := b.enqueue(store.NewMessage{Queue: "dlq", Payload: []byte("dlq head"), Key: "g"})[0]
	id := b.enqueue(store.NewMessage{Payload: []byte("body"), Attributes: []byte(`{"a":1}`), Key: "g", DedupID: "d1",
		Kind: "k", Priority: 3, MaxDeliveries: 2, DeadLetterQueue: "dlq"})[0]
	next := b.enqueue(store.NewMessage{Payload: []byte("next"), Key: "g"})[0]
	was := b.get(id)
	if was.DeadLetterQueue != "dlq" || was.DeadLetterSource != "" {
		t.Fatalf("enqueued with dead-letter queue %q, source %q; want dlq and none", was.DeadLetterQueue, was.DeadLetterSource)
	}
	firstClaim := b.clk.Now()
	d := b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "first"}); dead || err != nil {
		t.Fatalf("first Fail = %v, %v; want a retry", dead, err)
	}
	b.clk.Advance(time.Second)
	d = b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "second"}); !dead || err != nil {
		t.Fatalf("last Fail = %v, %v; want dead", dead, err)
	}
	in := b.wantArrived(id, was, "dlq", "src", store.Waiting, 2, firstClaim)
	if in.DeadReason != store.ReasonMaxDeliveries || in.LastError != "second" || in.MaxDeliveries != store.MaxDeliveriesLimit || in.DeadLetterQueue != "" {
		t.Fatalf("moved message: reason %q, error %q, budget %d, dead-letter queue %q; want max_deliveries, second, %d, none",
			in.DeadReason, in.LastError, in.MaxDeliveries, in.DeadLetterQueue, store.MaxDeliveriesLimit)
	}
	if st := b.statsOf("src"); st.Dead != 0 || st.Pending != 1 || st.Waiting != 0 {
		t.Fatalf("source stats %+v, want the next of the key pending and nothing dead", st)
	}
	if st := b.statsOf("dlq"); st.Pending != 1 || st.Waiting != 1 {
		t.Fatalf("dead-letter queue stats %+v, want its head pending and the dead letter waiting", st)
	}
	wantLost(t, "Complete with the lease the message died under", b.complete(d.Lease))
	if got := b.claimOne(); got.MessageID != next {
		t.Fatalf("claimed %d from the source, want its key's next %d", got.MessageID, next)
	}
	hd := b.claimMany("dlq", 10)
	if len(hd) != 1 || hd[0].MessageID != head {
		t.Fatalf("claimed %v from the dead-letter queue, want its head %d alone", ids(hd), head)
	}
	b.mustComplete(hd[0].Lease)
	got := b.claimMany("dlq", 10)
	if len(got) != 1 || got[0].MessageID != id || got[0].Attempt != 3 || got[0].DeadLetterSource != "src" || got[0].DedupID != "" ||
		!got[0].EnqueuedAt.Equal(was.EnqueuedAt) || !got[0].FirstClaimedAt.Equal(firstClaim) {
		t.Fatalf("claimed %+v from the dead-letter queue, want message %d, attempt 3, from src, enqueued at %s, first claimed at %s",
			got, id, was.EnqueuedAt, firstClaim)
	}
	wantLost(t, "Complete with the lease the message died under", b.complete(d.Lease))
	b.mustComplete(got[0].Lease)
}

// A failure may name the dead-letter queue itself (a policy set after
// the message was sent); its own queue leaves it dead there. A message
// without one dies in its queue, as ever.
func testDeadLetterQueueOfFailure(t *testing.T, f Factory) {
	b := setup(t, f)
	b.record("dlq")
	moved, own, plain := b.send("moved"), b.send("own"), b.send("plain")
	for _, c := range []struct {
		id  int64
		dlq string
	}{{moved, "dlq"}, {own, b.queue}, {plain, ""}} {
		d := b.claimOne()
		if d.MessageID != c.id {
			t.Fatalf("claimed %d, want %d", d.MessageID, c.id)
		}
		if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Permanent: true, Error: "over", DeadLetterQueue: c.dlq}); !dead || err != nil {
			t.Fatalf("Fail = %v, %v", dead, err)
		}
	}
	if in := b.get(moved); in.Queue != "dlq" || in.State != store.Pending || in.DeadReason != store.ReasonPermanent || in.DeadLetterSource != b.queue {
		t.Fatalf("moved message %+v", in)
	}
	b.wantState(own, store.Dead)
	b.wantState(plain, store.Dead)
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: store.Lease{MessageID: 1, FencingToken: 1}, DeadLetterQueue: "bad\x00"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Fail with a bad dead-letter queue = %v, want ErrInvalid", err)
	}
	if _, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: "q", Payload: []byte("x"), DeadLetterQueue: "q"}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Enqueue with its own queue as dead-letter queue = %v, want ErrInvalid", err)
	}
}

// A failure with Uncount takes back the delivery its claim counted
// before it decides: a dead letter arrives in its dead-letter queue, or
// dies in its own, with the deliveries before that claim, and a retried
// message keeps its budget.
func testUncountedFailure(t *testing.T, f Factory) {
	b := setup(t, f)
	b.record("dlq")
	moved := b.enqueue(store.NewMessage{Payload: []byte("moved"), MaxDeliveries: 5, DeadLetterQueue: "dlq"})[0]
	was := b.get(moved)
	firstClaim := b.clk.Now()
	if err := b.s.Release(b.ctx, store.Release{Lease: b.claimOne().Lease}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	d := b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Permanent: true, Error: "over", Uncount: true}); !dead || err != nil {
		t.Fatalf("uncounted permanent Fail = %v, %v; want dead", dead, err)
	}
	b.wantArrived(moved, was, "dlq", b.queue, store.Pending, 1, firstClaim)

	stays := b.send("stays")
	d = b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Permanent: true, Error: "over", Uncount: true}); !dead || err != nil {
		t.Fatalf("uncounted permanent Fail = %v, %v; want dead", dead, err)
	}
	if in := b.wantState(stays, store.Dead); in.Deliveries != 0 {
		t.Fatalf("dead message has %d deliveries, want 0", in.Deliveries)
	}

	last := b.enqueue(store.NewMessage{Payload: []byte("last"), MaxDeliveries: 1})[0]
	d = b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "again", Uncount: true}); dead || err != nil {
		t.Fatalf("uncounted Fail on the only delivery = %v, %v; want a retry", dead, err)
	}
	if in := b.wantState(last, store.Pending); in.Deliveries != 0 {
		t.Fatalf("retried message has %d deliveries, want 0", in.Deliveries)
	}
}

// The reaper's death of a message with a dead-letter queue is a move
// there too, reported as such; one without dies in its queue.
func testDeadLetterQueueOnReap(t *testing.T, f Factory) {
	b := setup(t, f)
	b.record("dlq")
	id := b.enqueue(store.NewMessage{Payload: []byte("x"), MaxDeliveries: 1, DeadLetterQueue: "dlq"})[0]
	plain := b.enqueue(store.NewMessage{Payload: []byte("y"), MaxDeliveries: 1})[0]
	was := b.get(id)
	firstClaim := b.clk.Now()
	b.claimFor(2, time.Second)
	b.clk.Advance(2 * time.Second)
	rs := b.reap()
	if len(rs) != 2 || rs[0].ID != id || !rs[0].Dead || rs[0].MovedTo != "dlq" || rs[1].ID != plain || !rs[1].Dead || rs[1].MovedTo != "" {
		t.Fatalf("reap = %+v, want %d moved to dlq and %d dead", rs, id, plain)
	}
	in := b.wantArrived(id, was, "dlq", b.queue, store.Pending, 1, firstClaim)
	if in.DeadReason != store.ReasonLeaseExpired {
		t.Fatalf("moved message's reason %q, want lease_expired", in.DeadReason)
	}
	b.wantState(plain, store.Dead)
	if rs := b.reap(); len(rs) != 0 {
		t.Fatalf("second reap = %+v", rs)
	}
}

// Move moves visible pending messages in claim order, or dead ones by
// id, to a queue or back to their dead-letter sources, in one call, as
// new messages of their new queue; it passes over delayed ones, and over
// those without a source when it sends them back; a moved head lets its
// line's next message go.
func testMove(t *testing.T, f Factory) {
	b := setup(t, f)
	b.queue = "dlq"
	b.record("dlq", "src", "other", "elsewhere")
	// Three dead letters from src, one from other.
	var dead []int64
	for _, src := range []string{"src", "src", "other", "src"} {
		id := b.enqueue(store.NewMessage{Queue: src, Payload: []byte(src), Key: "g" + src, MaxDeliveries: 1, DeadLetterQueue: "dlq"})[0]
		ds := b.claimMany(src, 1)
		if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[0].Lease, Error: "x"}); !dead || err != nil {
			t.Fatalf("Fail = %v, %v", dead, err)
		}
		dead = append(dead, id)
		b.clk.Advance(time.Millisecond)
	}
	// In dlq: dead[0] heads line gsrc, dead[1] and dead[3] wait behind it.
	plain := b.send("no source")
	delayed := b.enqueue(store.NewMessage{Payload: []byte("later"), Delay: time.Hour})[0]
	if st := b.stats(); st.Pending != 4 || st.Waiting != 2 {
		t.Fatalf("dlq stats %+v", st)
	}
	for _, bad := range []store.Move{
		{Queue: "dlq", State: store.Completed, Limit: 1},
		{Queue: "dlq", State: store.Pending, To: "dlq", Limit: 1},
		{Queue: "dlq", State: store.Pending, Limit: store.MaxBatch + 1},
		{Queue: "dlq", State: store.Pending, Limit: 1, MaxDeliveries: -1},
		{Queue: "", State: store.Pending, Limit: 1},
	} {
		if n, err := b.s.Move(b.ctx, bad); !errors.Is(err, store.ErrInvalid) || n != 0 {
			t.Fatalf("Move(%+v) = %d, %v; want ErrInvalid", bad, n, err)
		}
	}
	// Back to their sources, two at a time: dead[0] (its line's head) and
	// dead[2]; the plain one is passed over.
	n, err := b.s.Move(b.ctx, store.Move{Queue: "dlq", State: store.Pending, Limit: 2, MaxDeliveries: 4, DeadLetterQueue: "dlq"})
	if err != nil || n != 2 {
		t.Fatalf("Move = %d, %v; want 2", n, err)
	}
	// A dead letter kept its deliveries and first claim in dlq; a move
	// starts both again.
	for i, src := range map[int]string{0: "src", 2: "other"} {
		in := b.get(dead[i])
		if in.Queue != src || in.State != store.Pending || in.DeadLetterSource != "" || in.DeadReason != "" ||
			in.MaxDeliveries != 4 || in.DeadLetterQueue != "dlq" || in.Deliveries != 0 || !in.FirstClaimedAt.IsZero() || in.LastError != "x" {
			t.Fatalf("moved message %d: %+v", dead[i], in)
		}
	}
	// dead[1] now heads gsrc in dlq; dead[3] waits behind it.
	b.wantState(dead[1], store.Pending)
	b.wantState(dead[3], store.Waiting)
	// Moved back to src, where dead[0] heads gsrc: they wait behind it.
	if n, err := b.s.Move(b.ctx, store.Move{Queue: "dlq", State: store.Pending, Limit: 10}); err != nil || n != 1 {
		t.Fatalf("Move = %d, %v; want 1 (dead[1])", n, err)
	}
	if in := b.get(dead[1]); in.Queue != "src" || in.State != store.Waiting || in.MaxDeliveries != store.DefaultMaxDeliveries {
		t.Fatalf("message moved behind its key's head: %+v", in)
	}
	b.wantState(dead[3], store.Pending)
	b.wantState(plain, store.Pending)
	b.wantState(delayed, store.Pending)
	// To a named queue: the plain one too, never the delayed one.
	if n, err := b.s.Move(b.ctx, store.Move{Queue: "dlq", State: store.Pending, To: "elsewhere", Limit: 10}); err != nil || n != 2 {
		t.Fatalf("Move to elsewhere = %d, %v; want 2", n, err)
	}
	if st := b.stats(); st.Pending != 1 || st.Waiting != 0 || st.Delayed != 1 {
		t.Fatalf("dlq stats after the moves %+v, want the delayed message alone", st)
	}
	if st := b.statsOf("elsewhere"); st.Pending != 2 {
		t.Fatalf("elsewhere stats %+v", st)
	}
	// Dead messages move by id.
	b.queue = "elsewhere"
	b.killOne(dead[3])
	if n, err := b.s.Move(b.ctx, store.Move{Queue: "elsewhere", State: store.Dead, To: "dlq", Limit: 10}); err != nil || n != 1 {
		t.Fatalf("Move of the dead = %d, %v; want 1", n, err)
	}
	if in := b.get(dead[3]); in.Queue != "dlq" || in.State != store.Pending {
		t.Fatalf("moved dead message %+v", in)
	}
	if n, err := b.s.Move(b.ctx, store.Move{Queue: "nothing-here", State: store.Dead, Limit: 10}); err != nil || n != 0 {
		t.Fatalf("Move from an empty queue = %d, %v", n, err)
	}
}

// The first message of a run that dies with a dead-letter queue moves
// there and leaves its key's line as a death in place does: the rest of
// the run runs on, and the key's next message goes when the whole run is
// done.
func testDeadLetterQueueOfARun(t *testing.T, f Factory) {
	b := setup(t, f)
	b.record("dlq")
	msgs := keyed("K", 4)
	msgs[0].MaxDeliveries, msgs[0].DeadLetterQueue = 1, "dlq"
	k := b.enqueue(msgs...)
	was := b.get(k[0])
	firstClaim := b.clk.Now()
	ds := b.claimRuns(3)
	sameIDs(t, "the run", ids(ds), k[:3])
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[0].Lease, Error: "boom"}); !dead || err != nil {
		t.Fatalf("Fail = %v, %v; want dead", dead, err)
	}
	b.wantArrived(k[0], was, "dlq", b.queue, store.Pending, 1, firstClaim)
	b.wantState(k[1], store.Processing)
	b.wantState(k[2], store.Processing)
	b.wantState(k[3], store.Waiting)
	b.wantDeliveries(k[1], 1)
	b.wantDeliveries(k[2], 1)
	if st := b.stats(); st.Processing != 2 || st.Waiting != 1 || st.Pending != 0 || st.Dead != 0 {
		t.Fatalf("stats %+v, want 2 processing and 1 waiting", st)
	}
	b.claimNone()
	b.mustComplete(ds[2].Lease)
	b.claimNone()
	b.mustComplete(ds[1].Lease)
	sameIDs(t, "after the run", ids(b.claimRuns(3)), k[3:])
}

// The reaper's move of a run's first message to its dead-letter queue
// leaves the rest of the run as a death in place does: the next is the
// key's head again, counted, and the one after waits behind it,
// uncounted.
func testDeadLetterQueueOfAReapedRun(t *testing.T, f Factory) {
	b := setup(t, f)
	b.record("dlq")
	msgs := keyed("K", 3)
	msgs[0].MaxDeliveries, msgs[0].DeadLetterQueue = 1, "dlq"
	k := b.enqueue(msgs...)
	sameIDs(t, "the run", ids(b.claimRuns(3)), k)
	b.clk.Advance(lease)
	rs := b.reap()
	if len(rs) != 3 || !rs[0].Dead || rs[0].MovedTo != "dlq" || rs[1].Dead || rs[2].Dead {
		t.Fatalf("Reap = %+v, want the first moved to dlq and 2 back", rs)
	}
	if in := b.get(k[0]); in.Queue != "dlq" || in.State != store.Pending {
		t.Fatalf("moved message %+v, want pending in dlq", in)
	}
	b.wantState(k[1], store.Pending)
	b.wantState(k[2], store.Waiting)
	b.wantDeliveries(k[1], 1)
	b.wantDeliveries(k[2], 0)
	sameIDs(t, "after the reap", ids(b.claimRuns(3)), k[1:])
}

// No lease from before a move reaches the moved message, not even a late
// completion: a dead letter moved to its dead-letter queue, a pending
// message that Move moved, and a dead message that Redrive brought back
// all refuse it, and their next claims complete them.
func testLateCompletionAfterMove(t *testing.T, f Factory) {
	b := setup(t, f)
	b.record("dlq", "elsewhere")
	dl := b.enqueue(store.NewMessage{Payload: []byte("dl"), MaxDeliveries: 1, DeadLetterQueue: "dlq"})[0]
	d := b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "boom"}); !dead || err != nil {
		t.Fatalf("Fail = %v, %v; want dead", dead, err)
	}
	wantLost(t, "late Complete of a dead letter moved to its dead-letter queue", b.completeLate(store.Completion{Lease: d.Lease})[0])
	if in := b.get(dl); in.Queue != "dlq" || in.State != store.Pending {
		t.Fatalf("moved message %+v, want pending in dlq", in)
	}
	got := b.claimMany("dlq", 1)
	if len(got) != 1 || got[0].MessageID != dl || got[0].FencingToken == d.FencingToken {
		t.Fatalf("claimed %+v from dlq, want %d under a new token", got, dl)
	}
	b.mustComplete(got[0].Lease)

	moved := b.send("moved")
	d = b.claimOne()
	if err := b.s.Release(b.ctx, store.Release{Lease: d.Lease, Uncount: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.s.Move(b.ctx, store.Move{Queue: b.queue, State: store.Pending, To: "elsewhere", Limit: 1}); err != nil || n != 1 {
		t.Fatalf("Move = %d, %v; want 1", n, err)
	}
	wantLost(t, "late Complete of a message that Move moved", b.completeLate(store.Completion{Lease: d.Lease})[0])
	if in := b.get(moved); in.Queue != "elsewhere" || in.State != store.Pending {
		t.Fatalf("moved message %+v, want pending in elsewhere", in)
	}

	redriven := b.enqueue(store.NewMessage{Payload: []byte("redriven"), MaxDeliveries: 1})[0]
	d = b.claimOne()
	if dead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "boom"}); !dead || err != nil {
		t.Fatalf("Fail = %v, %v; want dead", dead, err)
	}
	if n, err := b.s.Redrive(b.ctx, b.queue, []int64{redriven}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v; want 1", n, err)
	}
	wantLost(t, "late Complete of a redriven message", b.completeLate(store.Completion{Lease: d.Lease})[0])
	b.wantState(redriven, store.Pending)
	again := b.claimOne()
	if again.MessageID != redriven || again.FencingToken == d.FencingToken {
		t.Fatalf("claimed %+v, want %d under a new token", again, redriven)
	}
	b.mustCompleteLate(again.Lease)
}

// A message moved into a queue, by Move or as a dead letter, takes its
// place in its key's line as a new message would: after every message of
// its key already there, though its id is older than theirs. Runs take
// it last, the next head is the one that arrived first, and a run's
// message that goes back brings the moved one back with it.
func testMovedMessageTakesItsPlace(t *testing.T, f Factory) {
	b := setup(t, f)
	b.queue = "dst"
	b.record("dst")
	moved := b.enqueue(store.NewMessage{Queue: "src", Payload: []byte("moved"), Key: "g"})[0]
	dead := b.enqueue(store.NewMessage{Queue: "src", Payload: []byte("dead"), Key: "h", MaxDeliveries: 1, DeadLetterQueue: "dst"})[0]
	g := b.enqueue(keyed("g", 3)...)
	h := b.enqueue(keyed("h", 2)...)
	if n, err := b.s.Move(b.ctx, store.Move{Queue: "src", State: store.Pending, To: "dst", Limit: 1}); err != nil || n != 1 {
		t.Fatalf("Move = %d, %v; want 1", n, err)
	}
	ds := b.claimMany("src", 1)
	if len(ds) != 1 || ds[0].MessageID != dead {
		t.Fatalf("claimed %v from src, want %d", ids(ds), dead)
	}
	if isDead, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[0].Lease, Error: "boom"}); !isDead || err != nil {
		t.Fatalf("Fail = %v, %v; want dead", isDead, err)
	}
	b.wantState(moved, store.Waiting)
	b.wantState(dead, store.Waiting)
	if bk, err := b.s.BlockedKeys(b.ctx, "dst", "", 0); err != nil || len(bk) != 2 || bk[0].Head.ID != g[0] || bk[1].Head.ID != h[0] {
		t.Fatalf("BlockedKeys = %+v, %v; want g headed by %d, h by %d", bk, err, g[0], h[0])
	}

	// Key g as one run, the moved message last.
	run := b.claimRuns(4)
	sameIDs(t, "the run of g", ids(run), append(slices.Clone(g), moved))
	// Its second message goes back: the third and the moved one go back
	// with it, waiting behind the head, which runs on.
	if isDead, err := b.s.Fail(b.ctx, store.Failure{Lease: run[1].Lease, Error: "again"}); isDead || err != nil {
		t.Fatalf("Fail = %v, %v; want a retry", isDead, err)
	}
	b.wantState(g[0], store.Processing)
	for _, id := range []int64{g[1], g[2], moved} {
		b.wantState(id, store.Waiting)
	}
	b.mustComplete(run[0].Lease)
	sameIDs(t, "g after its head", ids(b.claimRuns(3)), []int64{g[1], g[2], moved})

	// Key h one at a time: its head, its next, then the dead letter.
	for _, want := range []int64{h[0], h[1], dead} {
		d := b.claimOne()
		if d.MessageID != want {
			t.Fatalf("claimed %d from dst, want %d", d.MessageID, want)
		}
		b.mustComplete(d.Lease)
	}
}

// A queue without a record (deleted, or never created) takes no moved
// message. A dead letter whose dead-letter queue was deleted since it was
// sent dies in its own queue, with its reason and an error that says
// why; Move to such a queue, or back to such a source, moves nothing and
// says which queue is missing. The deleted queue stays deleted, and no
// message is lost.
func testMoveIntoDeletedQueue(t *testing.T, f Factory) {
	b := setup(t, f)
	b.record("dlq", "src")
	failed := b.enqueue(store.NewMessage{Payload: []byte("failed"), MaxDeliveries: 1, DeadLetterQueue: "dlq"})[0]
	reaped := b.enqueue(store.NewMessage{Payload: []byte("reaped"), MaxDeliveries: 1, DeadLetterQueue: "dlq"})[0]
	if _, err := b.s.DeleteQueue(b.ctx, "dlq"); err != nil {
		t.Fatal(err)
	}
	d := b.claimOne()
	if isDead, err := b.s.Fail(b.ctx, store.Failure{Lease: d.Lease, Error: "boom"}); !isDead || err != nil || d.MessageID != failed {
		t.Fatalf("Fail of %d = %v, %v; want %d dead", d.MessageID, isDead, err, failed)
	}
	b.claimFor(1, time.Second)
	b.clk.Advance(2 * time.Second)
	if rs := b.reap(); len(rs) != 1 || rs[0].ID != reaped || !rs[0].Dead || rs[0].MovedTo != "" {
		t.Fatalf("Reap = %+v, want %d dead where it is", rs, reaped)
	}
	for _, c := range []struct {
		id     int64
		reason store.DeadReason
		err    string
	}{
		{failed, store.ReasonMaxDeliveries, "boom; not moved to its dead-letter queue dlq, which does not exist"},
		{reaped, store.ReasonLeaseExpired, "lease expired; not moved to its dead-letter queue dlq, which does not exist"},
	} {
		if in := b.get(c.id); in.Queue != b.queue || in.State != store.Dead || in.DeadReason != c.reason || in.LastError != c.err {
			t.Fatalf("message %d: %s in %q, reason %q, error %q; want dead in %q, %q, %q",
				c.id, in.State, in.Queue, in.DeadReason, in.LastError, b.queue, c.reason, c.err)
		}
	}
	if st := b.statsOf("dlq"); st.Pending+st.Waiting+st.Dead != 0 {
		t.Fatalf("the deleted queue holds messages: %+v", st)
	}
	if _, err := b.s.QueueInfo(b.ctx, "dlq"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo of the deleted queue = %v, want ErrNotFound", err)
	}

	// Move to the deleted queue: nothing moves.
	pending := b.send("pending")
	if n, err := b.s.Move(b.ctx, store.Move{Queue: b.queue, State: store.Pending, To: "dlq", Limit: 10}); !errors.Is(err, store.ErrNotFound) || n != 0 {
		t.Fatalf("Move to a deleted queue = %d, %v; want 0, ErrNotFound", n, err)
	}
	if n, err := b.s.Move(b.ctx, store.Move{Queue: b.queue, State: store.Dead, To: "dlq", Limit: 10}); !errors.Is(err, store.ErrNotFound) || n != 0 {
		t.Fatalf("Move of the dead to a deleted queue = %d, %v; want 0, ErrNotFound", n, err)
	}
	b.wantState(pending, store.Pending)
	b.mustComplete(b.claimOne().Lease)

	// Back to a deleted source: a batch with one such message moves
	// nothing, the messages of sources that stand included.
	b.record("dlq")
	fromSrc := b.enqueue(store.NewMessage{Queue: "src", Payload: []byte("src"), MaxDeliveries: 1, DeadLetterQueue: "dlq"})[0]
	fromQ := b.enqueue(store.NewMessage{Payload: []byte("q"), MaxDeliveries: 1, DeadLetterQueue: "dlq"})[0]
	for _, q := range []string{"src", b.queue} {
		ds := b.claimMany(q, 1)
		if isDead, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[0].Lease, Error: "x"}); !isDead || err != nil {
			t.Fatalf("Fail = %v, %v; want dead", isDead, err)
		}
	}
	if _, err := b.s.DeleteQueue(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	if n, err := b.s.Move(b.ctx, store.Move{Queue: "dlq", State: store.Pending, Limit: 10}); !errors.Is(err, store.ErrNotFound) || n != 0 {
		t.Fatalf("Move back to a deleted source = %d, %v; want 0, ErrNotFound", n, err)
	}
	for _, id := range []int64{fromSrc, fromQ} {
		if in := b.get(id); in.Queue != "dlq" || in.State != store.Pending {
			t.Fatalf("message %d is %s in %q, want pending in dlq", id, in.State, in.Queue)
		}
	}
}
