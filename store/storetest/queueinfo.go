package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// CreateQueue makes a queue's record once: the first call reports it
// made it, a later one returns the record as it stands, whatever
// attributes it gives. Attributes round-trip, empty values left out.
func testCreateQueue(t *testing.T, f Factory) {
	b := setup(t, f)
	if _, err := b.s.QueueInfo(b.ctx, b.queue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo of a queue never created: %v, want ErrNotFound", err)
	}
	attrs := map[string]string{"VisibilityTimeout": "30", "Policy": `{"a": "<b> & é"}`, "Empty": ""}
	created := b.clk.Now()
	info, made, err := b.s.CreateQueue(b.ctx, b.queue, attrs)
	if err != nil || !made {
		t.Fatalf("CreateQueue = %+v, %v, %v; want a new record", info, made, err)
	}
	want := store.QueueInfo{Queue: b.queue, Attributes: map[string]string{"VisibilityTimeout": "30", "Policy": `{"a": "<b> & é"}`},
		CreatedAt: created, UpdatedAt: created}
	wantRecord(t, "the new record", info, want)
	if attrs["Empty"] != "" || len(attrs) != 3 {
		t.Fatalf("CreateQueue changed the caller's attributes: %v", attrs)
	}
	attrs["VisibilityTimeout"] = "changed by the caller"
	wantRecord(t, "QueueInfo after the caller changed its map", b.queueInfo(b.queue), want)

	b.clk.Advance(time.Second)
	again, made, err := b.s.CreateQueue(b.ctx, b.queue, map[string]string{"VisibilityTimeout": "60"})
	if err != nil || made {
		t.Fatalf("second CreateQueue = %+v, %v, %v; want the record as it was", again, made, err)
	}
	wantRecord(t, "the record a second CreateQueue returns", again, want)
	wantRecord(t, "QueueInfo", b.queueInfo(b.queue), want)

	// No attributes: an empty map, not nil.
	bare, made, err := b.s.CreateQueue(b.ctx, "bare", nil)
	if err != nil || !made || bare.Attributes == nil || len(bare.Attributes) != 0 {
		t.Fatalf("CreateQueue without attributes = %+v, %v, %v; want a record with an empty map", bare, made, err)
	}
	if info := b.queueInfo("bare"); info.Attributes == nil || len(info.Attributes) != 0 {
		t.Fatalf("QueueInfo of a queue without attributes: %+v; want an empty map", info)
	}

	// A queue needs no record to take messages, and taking them makes
	// none.
	b.enqueue(store.NewMessage{Queue: "unrecorded"})
	if _, err := b.s.QueueInfo(b.ctx, "unrecorded"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo of a queue that only took messages: %v, want ErrNotFound", err)
	}
	if _, err := b.s.QueueInfo(b.ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("QueueInfo of an empty name: %v, want ErrInvalid", err)
	}
}

// Of concurrent CreateQueue calls for one queue, exactly one makes the
// record, and all return it.
func testCreateQueueConcurrently(t *testing.T, f Factory) {
	b := setup(t, f)
	const callers = 8
	type result struct {
		info store.QueueInfo
		made bool
		err  error
	}
	results := make([]result, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			info, made, err := b.s.CreateQueue(b.ctx, b.queue, map[string]string{"Caller": fmt.Sprint(i)})
			results[i] = result{info, made, err}
		})
	}
	wg.Wait()
	winner := -1
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("CreateQueue %d: %v", i, r.err)
		}
		if r.made {
			if winner >= 0 {
				t.Fatalf("CreateQueue %d and %d both report making the record", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no CreateQueue reports making the record")
	}
	want := results[winner].info
	if want.Attributes["Caller"] != fmt.Sprint(winner) {
		t.Fatalf("the record holds %v, the attributes of a call that did not make it (%d did)", want.Attributes, winner)
	}
	for i, r := range results {
		wantRecord(t, fmt.Sprintf("the record CreateQueue %d returned", i), r.info, want)
	}
	wantRecord(t, "QueueInfo", b.queueInfo(b.queue), want)
}

// Pausing a queue makes no record, and a record made while the queue is
// paused says so; resuming keeps the record. Queues lists a recorded
// queue without messages.
func testQueueRecordAndPause(t *testing.T, f Factory) {
	b := setup(t, f)
	if err := b.s.Pause(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.QueueInfo(b.ctx, "paused"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo of a queue that is only paused: %v, want ErrNotFound", err)
	}
	if err := b.s.Resume(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.QueueInfo(b.ctx, "paused"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo of a queue that was paused and resumed: %v, want ErrNotFound", err)
	}

	if err := b.s.Pause(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	info, made, err := b.s.CreateQueue(b.ctx, b.queue, map[string]string{"A": "1"})
	if err != nil || !made || !info.Paused {
		t.Fatalf("CreateQueue of a paused queue = %+v, %v, %v; want a new record, paused", info, made, err)
	}
	if err := b.s.Resume(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	info.Paused = false
	wantRecord(t, "the record after Resume", b.queueInfo(b.queue), info)
	if err := b.s.Pause(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	if !b.queueInfo(b.queue).Paused {
		t.Fatal("QueueInfo does not say the queue is paused")
	}
	if err := b.s.Resume(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}

	// Listed: the recorded queue (no messages, not paused); not the
	// queue paused and resumed without a record.
	if _, _, err := b.s.CreateQueue(b.ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	b.enqueue(store.NewMessage{Queue: "busy"})
	if qs, err := b.s.Queues(b.ctx); err != nil || !slices.Equal(qs, []string{"busy", "empty", b.queue}) {
		t.Fatalf("Queues = %v, %v; want [busy empty %s]", qs, err, b.queue)
	}
}

// SetQueueAttributes merges into the record: a key with an empty value
// goes, the others are set; UpdatedAt moves, CreatedAt stays. A queue
// without a record is ErrNotFound and gets none.
func testSetQueueAttributes(t *testing.T, f Factory) {
	b := setup(t, f)
	if _, err := b.s.SetQueueAttributes(b.ctx, b.queue, map[string]string{"A": "1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetQueueAttributes of a queue never created: %v, want ErrNotFound", err)
	}
	if _, err := b.s.QueueInfo(b.ctx, b.queue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused SetQueueAttributes made a record: %v", err)
	}
	if err := b.s.Pause(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.SetQueueAttributes(b.ctx, "paused", map[string]string{"A": "1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetQueueAttributes of a queue that is only paused: %v, want ErrNotFound", err)
	}

	created := b.clk.Now()
	if _, _, err := b.s.CreateQueue(b.ctx, b.queue, map[string]string{"A": "1", "B": "2", "C": "3"}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	changes := map[string]string{"A": "10", "B": "", "D": "4", "Gone": ""}
	info, err := b.s.SetQueueAttributes(b.ctx, b.queue, changes)
	if err != nil {
		t.Fatal(err)
	}
	want := store.QueueInfo{Queue: b.queue, Attributes: map[string]string{"A": "10", "C": "3", "D": "4"},
		CreatedAt: created, UpdatedAt: b.clk.Now()}
	wantRecord(t, "the merged record", info, want)
	wantRecord(t, "QueueInfo after the merge", b.queueInfo(b.queue), want)
	if len(changes) != 4 || changes["B"] != "" {
		t.Fatalf("SetQueueAttributes changed the caller's attributes: %v", changes)
	}

	// No changes still marks the record updated.
	b.clk.Advance(time.Second)
	want.UpdatedAt = b.clk.Now()
	info, err = b.s.SetQueueAttributes(b.ctx, b.queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRecord(t, "the record after an empty SetQueueAttributes", info, want)
}

// PurgeQueue deletes every message of the queue, in every state, and
// keeps its record and its pause; its counts, the completed one
// included, are zero after it and count again from there.
func testPurgeQueue(t *testing.T, f Factory) {
	b := setup(t, f)
	record, _, err := b.s.CreateQueue(b.ctx, b.queue, map[string]string{"A": "1"})
	if err != nil {
		t.Fatal(err)
	}
	ids := b.enqueue(
		store.NewMessage{Payload: []byte("completed")},
		store.NewMessage{Payload: []byte("dead"), MaxDeliveries: 1},
		store.NewMessage{Payload: []byte("processing"), Key: "k", DedupID: "d"},
		store.NewMessage{Payload: []byte("cancelled")},
	)
	ds := b.claim(3)
	if len(ds) != 3 {
		t.Fatalf("claimed %d, want 3", len(ds))
	}
	b.mustComplete(ds[0].Lease)
	if _, err := b.s.Fail(b.ctx, store.Failure{Lease: ds[1].Lease, Error: "no", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Cancel(b.ctx, b.queue, []int64{ids[3]}); err != nil {
		t.Fatal(err)
	}
	b.enqueue(
		store.NewMessage{Payload: []byte("waiting"), Key: "k"},
		store.NewMessage{Payload: []byte("pending")},
		store.NewMessage{Payload: []byte("delayed"), Delay: time.Hour},
	)
	b.enqueue(store.NewMessage{Queue: "other", Payload: []byte("other")})
	if err := b.s.Pause(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(); st.Completed != 1 || st.Dead != 1 || st.Processing != 1 || st.Cancelled != 1 || st.Waiting != 1 ||
		st.Pending != 2 || st.Delayed != 1 {
		t.Fatalf("stats before PurgeQueue: %+v; want one message in each state, two pending, one of them delayed", st)
	}

	n, err := b.s.PurgeQueue(b.ctx, b.queue)
	if err != nil || n != 7 {
		t.Fatalf("PurgeQueue = %d, %v; want 7", n, err)
	}
	if st := b.stats(); st != (store.Stats{Queue: b.queue, Paused: true}) {
		t.Fatalf("stats after PurgeQueue: %+v; want nothing counted, still paused", st)
	}
	for st := range store.State(store.States) {
		if infos, err := b.s.List(b.ctx, store.ListFilter{Queue: b.queue, State: st}); err != nil || len(infos) != 0 {
			t.Fatalf("%s messages listed after PurgeQueue: %d, %v", st, len(infos), err)
		}
	}
	record.Paused = true
	wantRecord(t, "the record after PurgeQueue", b.queueInfo(b.queue), record)
	wantLost(t, "Complete of a purged message", b.complete(ds[2].Lease))
	if st, err := b.s.Stats(b.ctx, "other"); err != nil || st.Pending != 1 {
		t.Fatalf("another queue lost messages: %+v, %v", st, err)
	}
	if qs, err := b.s.Queues(b.ctx); err != nil || !slices.Equal(qs, []string{"other", b.queue}) {
		t.Fatalf("Queues after PurgeQueue = %v, %v; want [other %s]", qs, err, b.queue)
	}

	// The queue works again, its key and dedup id forgotten, and counts
	// from zero.
	if err := b.s.Resume(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	res, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: b.queue, Key: "k", DedupID: "d"}})
	if err != nil || res[0].Duplicate {
		t.Fatalf("enqueue after PurgeQueue: %+v, %v; want a new message", res, err)
	}
	b.mustComplete(b.claimOne().Lease)
	if st := b.stats(); st != (store.Stats{Queue: b.queue, Completed: 1}) {
		t.Fatalf("stats after a completion after PurgeQueue: %+v; want one completed", st)
	}

	if n, err := b.s.PurgeQueue(b.ctx, "never-used"); err != nil || n != 0 {
		t.Fatalf("PurgeQueue of an unused queue = %d, %v", n, err)
	}
	if _, err := b.s.QueueInfo(b.ctx, "never-used"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PurgeQueue made a record: %v", err)
	}
	if _, err := b.s.PurgeQueue(b.ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("PurgeQueue of an empty name: %v, want ErrInvalid", err)
	}
}

// DeleteQueue deletes the queue's record with its messages; the queue can
// be created again.
func testDeleteQueueRecord(t *testing.T, f Factory) {
	b := setup(t, f)
	if _, _, err := b.s.CreateQueue(b.ctx, b.queue, map[string]string{"A": "1"}); err != nil {
		t.Fatal(err)
	}
	b.send("x")
	if n, err := b.s.DeleteQueue(b.ctx, b.queue); err != nil || n != 1 {
		t.Fatalf("DeleteQueue = %d, %v; want 1", n, err)
	}
	if _, err := b.s.QueueInfo(b.ctx, b.queue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo after DeleteQueue: %v, want ErrNotFound", err)
	}
	if qs, err := b.s.Queues(b.ctx); err != nil || len(qs) != 0 {
		t.Fatalf("Queues after DeleteQueue = %v, %v; want none", qs, err)
	}
	// An empty recorded queue goes too.
	if _, _, err := b.s.CreateQueue(b.ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := b.s.DeleteQueue(b.ctx, "empty"); err != nil || n != 0 {
		t.Fatalf("DeleteQueue of an empty queue = %d, %v", n, err)
	}
	if _, err := b.s.QueueInfo(b.ctx, "empty"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueInfo after DeleteQueue of an empty queue: %v, want ErrNotFound", err)
	}

	b.clk.Advance(time.Second)
	info, made, err := b.s.CreateQueue(b.ctx, b.queue, map[string]string{"B": "2"})
	if err != nil || !made {
		t.Fatalf("CreateQueue after DeleteQueue = %+v, %v, %v; want a new record", info, made, err)
	}
	wantRecord(t, "the record made again", info, store.QueueInfo{Queue: b.queue, Attributes: map[string]string{"B": "2"},
		CreatedAt: b.clk.Now(), UpdatedAt: b.clk.Now()})
}

// Bad queue attributes, or attributes that would make a record too big,
// are ErrInvalid and change nothing.
func testBadQueueAttributesChangeNothing(t *testing.T, f Factory) {
	b := setup(t, f)
	longKey := strings.Repeat("k", store.MaxNameLength+1)
	bad := map[string]map[string]string{
		"an empty key":                {"": "x"},
		"a key over the length limit": {longKey: "x"},
		"a key of invalid UTF-8":      {"a\xff": "x"},
		"a key with a NUL":            {"a\x00b": "x"},
		"a value of invalid UTF-8":    {"A": "\xfe"},
		"a value with a NUL":          {"A": "a\x00b"},
		"attributes over the size limit": {"A": strings.Repeat("v", store.MaxQueueAttributesSize/2),
			"B": strings.Repeat("v", store.MaxQueueAttributesSize/2)},
	}
	for what, attrs := range bad {
		if _, _, err := b.s.CreateQueue(b.ctx, b.queue, attrs); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateQueue with %s: %v, want ErrInvalid", what, err)
		}
	}
	if _, err := b.s.QueueInfo(b.ctx, b.queue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused CreateQueue calls made a record: %v", err)
	}
	if _, _, err := b.s.CreateQueue(b.ctx, "", nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("CreateQueue of an empty name: %v, want ErrInvalid", err)
	}
	if _, err := b.s.SetQueueAttributes(b.ctx, "", nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("SetQueueAttributes of an empty name: %v, want ErrInvalid", err)
	}

	// Just within the limit, keys included.
	half := strings.Repeat("v", store.MaxQueueAttributesSize/2-1)
	record, _, err := b.s.CreateQueue(b.ctx, b.queue, map[string]string{"A": half})
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	for what, attrs := range bad {
		if _, err := b.s.SetQueueAttributes(b.ctx, b.queue, attrs); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SetQueueAttributes with %s: %v, want ErrInvalid", what, err)
		}
	}
	// Each call within the limit, the merged record one byte over it.
	if _, err := b.s.SetQueueAttributes(b.ctx, b.queue, map[string]string{"B": half + "v"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("SetQueueAttributes past the size limit of the merged record: %v, want ErrInvalid", err)
	}
	wantRecord(t, "the record after refused changes", b.queueInfo(b.queue), record)
	// Exactly at the limit.
	if info, err := b.s.SetQueueAttributes(b.ctx, b.queue, map[string]string{"B": half}); err != nil || len(info.Attributes) != 2 {
		t.Fatalf("SetQueueAttributes to exactly the size limit: %v, %v", info.Attributes, err)
	}
	// Removing a key makes room.
	if info, err := b.s.SetQueueAttributes(b.ctx, b.queue, map[string]string{"A": "", "C": half}); err != nil || len(info.Attributes) != 2 {
		t.Fatalf("SetQueueAttributes that removes a key to make room: %v, %v", info.Attributes, err)
	}
}

// queueInfo returns a queue's record, which must exist.
func (b *bundle) queueInfo(queue string) store.QueueInfo {
	b.t.Helper()
	info, err := b.s.QueueInfo(b.ctx, queue)
	if err != nil {
		b.t.Fatalf("QueueInfo(%s): %v", queue, err)
	}
	return info
}

// wantRecord fails the test unless got is the record want.
func wantRecord(t *testing.T, what string, got, want store.QueueInfo) {
	t.Helper()
	if got.Queue != want.Queue || got.Paused != want.Paused || !maps.Equal(got.Attributes, want.Attributes) ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
	if got.Attributes == nil {
		t.Fatalf("%s: the attributes are nil, want a map", what)
	}
}
