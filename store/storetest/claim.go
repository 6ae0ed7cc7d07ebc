package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

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
	var bad *store.BatchError
	if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &bad) || bad.Index != 1 || bad.Len != 2 {
		t.Fatalf("Enqueue with one bad message = %v, want ErrInvalid in a *store.BatchError naming message 1 (from 0) of 2", err)
	}
	if st := b.stats(); st.Pending != 0 {
		t.Fatalf("a failed batch enqueued %d messages", st.Pending)
	}
	got := b.enqueue(store.NewMessage{Payload: []byte("a")}, store.NewMessage{Payload: []byte("b")}, store.NewMessage{Payload: []byte("c")})
	if len(got) != 3 || !(got[0] < got[1] && got[1] < got[2]) {
		t.Fatalf("batch ids %v, want three increasing ids", got)
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
