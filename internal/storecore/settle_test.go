package storecore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// recorder is a backend whose settling transaction records the primitives
// the rules call, in order, and answers from held (the current leases) and
// found (the messages by id).
type recorder struct {
	closesOnly
	// reverse makes CompleteCurrent return what it completed in reverse
	// order, as a database may.
	reverse bool
	held    map[store.Lease]storecore.Held
	found   []storecore.Found
	movable []storecore.Transfer
	// deleted names queues without a record; every other has one.
	deleted []string
	calls   []string
	// tallies are what Tally was given, apart from calls.
	tallies []storecore.Tally
}

func (r *recorder) Settle(ctx context.Context, st storecore.Settlement) error {
	return st.Settle(ctx, recorderTx{r})
}

type recorderTx struct{ r *recorder }

func (t recorderTx) call(format string, args ...any) {
	t.r.calls = append(t.r.calls, fmt.Sprintf(format, args...))
}

func (t recorderTx) CompleteCurrent(_ context.Context, cs []store.Completion) ([]storecore.Held, error) {
	t.call("complete %d", len(cs))
	var out []storecore.Held
	for _, c := range cs {
		if h, ok := t.r.held[c.Lease]; ok {
			out = append(out, h)
			delete(t.r.held, c.Lease)
		}
	}
	if t.r.reverse {
		slices.Reverse(out)
	}
	return out, nil
}

// arrived gives a held message without an arrival its id as one, as a
// message never moved has.
func arrived(h storecore.Held) storecore.Held {
	h.Arrival = cmp.Or(h.Arrival, h.MessageID)
	return h
}

func (t recorderTx) Current(_ context.Context, l store.Lease) (storecore.Held, bool, error) {
	h, ok := t.r.held[l]
	return arrived(h), ok, nil
}

func (t recorderTx) Given(_ context.Context, l store.Lease) (storecore.Held, bool, error) {
	h, ok := t.r.held[l]
	return arrived(h), ok, nil
}

func (t recorderTx) Expired(context.Context) ([]storecore.Held, error) {
	var out []storecore.Held
	for _, h := range t.r.held {
		out = append(out, arrived(h))
	}
	slices.SortFunc(out, func(a, b storecore.Held) int { return int(a.MessageID - b.MessageID) })
	return out, nil
}

func (t recorderTx) Find(context.Context, []int64) ([]storecore.Found, error) { return t.r.found, nil }

func (t recorderTx) Kill(_ context.Context, ids []int64, reason store.DeadReason, errText string, visibleNow bool) error {
	t.call("kill %v %s %q %v", ids, reason, errText, visibleNow)
	for l := range t.r.held {
		if slices.Contains(ids, l.MessageID) {
			delete(t.r.held, l) // finished: no longer running
		}
	}
	return nil
}

func (t recorderTx) Movable(_ context.Context, m store.Move) ([]storecore.Transfer, error) {
	t.call("movable %s %s %q %d", m.Queue, m.State, m.To, m.Limit)
	return t.r.movable, nil
}

func (t recorderTx) Recorded(_ context.Context, queues []string) ([]string, error) {
	t.call("recorded %v", queues)
	return slices.DeleteFunc(slices.Clone(queues), func(q string) bool { return slices.Contains(t.r.deleted, q) }), nil
}

func (t recorderTx) Transfer(_ context.Context, ts []storecore.Transfer, a storecore.Arrival) error {
	t.call("transfer %v %+v", ts, a)
	return nil
}

func (t recorderTx) Uncount(_ context.Context, ids []int64) error {
	t.call("uncount %v", ids)
	return nil
}

func (t recorderTx) Retry(_ context.Context, ids []int64, delay time.Duration, errText string, setError, uncount bool) error {
	t.call("retry %v %s %q %v %v", ids, delay, errText, setError, uncount)
	return nil
}

// Running returns the held messages of the lines: every held message is
// processing.
func (t recorderTx) Running(_ context.Context, lines []storecore.Line) ([]storecore.Held, error) {
	t.call("running %v", lines)
	var out []storecore.Held
	for _, h := range t.r.held {
		if slices.Contains(lines, storecore.Line{Queue: h.Queue, Key: h.Key}) {
			out = append(out, arrived(h))
		}
	}
	return out, nil
}

func (t recorderTx) Hold(_ context.Context, ids []int64, uncount bool) error {
	t.call("hold %v %v", ids, uncount)
	return nil
}

func (t recorderTx) Cancel(_ context.Context, ids []int64) error {
	t.call("cancel %v", ids)
	return nil
}

func foundIDs(ms []storecore.Found) []int64 {
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

func (t recorderTx) Rerun(_ context.Context, ms []storecore.Found) error {
	t.call("rerun %v", foundIDs(ms))
	return nil
}

func (t recorderTx) Hasten(_ context.Context, ids []int64) error {
	t.call("hasten %v", ids)
	return nil
}

func (t recorderTx) Snoozed(_ context.Context, id int64) error {
	t.call("snoozed %d", id)
	return nil
}

func (t recorderTx) Delete(_ context.Context, ms []storecore.Found) error {
	t.call("delete %v", foundIDs(ms))
	return nil
}

func (t recorderTx) Lock(_ context.Context, lines []storecore.Line, msgs []store.NewMessage) error {
	t.call("lock %v %d", lines, len(msgs))
	return nil
}

func (t recorderTx) Promote(_ context.Context, lines []storecore.Line) error {
	t.call("promote %v", lines)
	return nil
}

func (t recorderTx) Insert(_ context.Context, msgs []store.NewMessage) error {
	t.call("insert %d", len(msgs))
	return nil
}

func (t recorderTx) Notify(_ context.Context, queues []string) error {
	t.call("notify %v", queues)
	return nil
}

func (t recorderTx) Tally(_ context.Context, ts []storecore.Tally) error {
	t.r.tallies = append(t.r.tallies, ts...)
	return nil
}

func newRecorder(t *testing.T, held ...storecore.Held) (*storecore.Store, *recorder) {
	r := &recorder{held: map[store.Lease]storecore.Held{}}
	for _, h := range held {
		r.held[h.Lease] = h
	}
	s := storecore.New(storecore.Config{Name: "x store", Options: store.Options{}.WithDefaults(), Wakeups: new(storecore.Wakeups)}, r)
	t.Cleanup(func() { s.Close() })
	return s, r
}

func checkCalls(t *testing.T, r *recorder, want ...string) {
	t.Helper()
	if !slices.Equal(r.calls, want) {
		t.Errorf("calls:\n  %s\nwant:\n  %s", strings.Join(r.calls, "\n  "), strings.Join(want, "\n  "))
	}
}

var (
	keyed   = storecore.Held{Lease: store.Lease{MessageID: 1, FencingToken: 10}, Queue: "q", Key: "k", Deliveries: 1, MaxDeliveries: 3}
	unkeyed = storecore.Held{Lease: store.Lease{MessageID: 2, FencingToken: 20}, Queue: "q", Deliveries: 3, MaxDeliveries: 3}
)

// A completion batch: each lease completes once however often it is
// listed, a lost one is reported, and the key's next message goes and the
// replies are sent only after every lock is taken.
func TestSettleComplete(t *testing.T) {
	for _, reverse := range []bool{false, true} {
		t.Run(fmt.Sprintf("reverse=%v", reverse), func(t *testing.T) {
			s, r := newRecorder(t, keyed, unkeyed)
			r.reverse = reverse
			lost := store.Lease{MessageID: 3, FencingToken: 30}
			reply := &store.NewMessage{Queue: "replies", Payload: []byte("ok")}
			results, err := s.Complete(t.Context(), []store.Completion{{Lease: keyed.Lease, Reply: reply}, {Lease: keyed.Lease}, {Lease: lost}, {Lease: unkeyed.Lease}})
			if err != nil {
				t.Fatal(err)
			}
			if results[0] != nil || !errors.Is(results[1], store.ErrLeaseLost) || !errors.Is(results[2], store.ErrLeaseLost) || results[3] != nil {
				t.Errorf("results = %v, want nil, lost (listed twice), lost, nil", results)
			}
			checkCalls(t, r, "complete 4", "lock [{q k}] 1", "promote [{q k}]", "notify [q]", "insert 1")
		})
	}
}

// A failure retries the message until its last delivery, then
// dead-letters it; a permanent one dead-letters it at once, with its
// reply.
func TestSettleFail(t *testing.T) {
	s, r := newRecorder(t, keyed, unkeyed)
	ctx := t.Context()
	if dead, err := s.Fail(ctx, store.Failure{Lease: keyed.Lease, Error: "boom", RetryDelay: time.Second}); dead || err != nil {
		t.Fatalf("Fail = %v, %v; want a retry", dead, err)
	}
	if dead, err := s.Fail(ctx, store.Failure{Lease: unkeyed.Lease, Error: "boom"}); !dead || err != nil {
		t.Fatalf("Fail on the last delivery = %v, %v; want dead", dead, err)
	}
	reply := &store.NewMessage{Queue: "replies", Payload: []byte("failed")}
	if dead, err := s.Fail(ctx, store.Failure{Lease: keyed.Lease, Error: "bad", Permanent: true, Reply: reply}); !dead || err != nil {
		t.Fatalf("permanent Fail = %v, %v; want dead", dead, err)
	}
	if _, err := s.Fail(ctx, store.Failure{Lease: store.Lease{MessageID: 9, FencingToken: 9}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Fail of a lost lease: %v, want ErrLeaseLost", err)
	}
	checkCalls(t, r,
		"running [{q k}]", `retry [1] 1s "boom" true false`, "notify [q]",
		`kill [2] max_deliveries "boom" false`,
		`kill [1] permanent_error "bad" false`, "lock [{q k}] 1", "promote [{q k}]", "notify [q]", "insert 1")
}

// The reaper gives back expired leases at once, dead-letters those on
// their last delivery, lets their keys' next messages go and wakes every
// queue it touched.
func TestSettleReap(t *testing.T) {
	dying := keyed
	dying.Deliveries = 3
	s, r := newRecorder(t, dying, storecore.Held{Lease: store.Lease{MessageID: 5, FencingToken: 50}, Queue: "other", Deliveries: 1, MaxDeliveries: 3})
	got, err := s.Reap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Dead || got[1].Dead {
		t.Errorf("Reap = %+v, want message 1 dead and 5 back", got)
	}
	checkCalls(t, r, `kill [1] lease_expired "lease expired" true`, `retry [5] 0s "lease expired" true false`, "lock [{q k}] 0", "promote [{q k}]", "notify [other q]")
}

// A message of a run that goes back brings back the rest of its run,
// uncounted: it is the key's head again, pending, when it was the run's
// first unfinished message, and waits behind the one still processing
// before it otherwise. An uncounted release takes its own delivery back
// too. The reaper's expired messages of one key go back as one run, the
// first counted.
func TestSettleRunBack(t *testing.T) {
	run := make([]storecore.Held, 3)
	for i := range run {
		run[i] = storecore.Held{Lease: store.Lease{MessageID: int64(i + 1), FencingToken: int64(10 + i)}, Queue: "q", Key: "k", Deliveries: 1, MaxDeliveries: 3}
	}
	ctx := t.Context()
	s, r := newRecorder(t, run...)
	if _, err := s.Fail(ctx, store.Failure{Lease: run[1].Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, "running [{q k}]", `retry [2] 0s "boom" true false`, "hold [2] false", "hold [3] true", "notify [q]")

	s, r = newRecorder(t, run...)
	if err := s.Release(ctx, store.Release{Lease: run[0].Lease, Delay: time.Second, Uncount: true}); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, "running [{q k}]", `retry [1] 1s "" false true`, "hold [2 3] true", "notify [q]")

	s, r = newRecorder(t, run...)
	if got, err := s.Reap(ctx); err != nil || len(got) != 3 || got[0].Dead || got[1].Dead || got[2].Dead {
		t.Fatalf("Reap = %+v, %v; want 3 back", got, err)
	}
	checkCalls(t, r, "running [{q k}]", `retry [1] 0s "lease expired" true false`, "hold [2 3] true", "notify [q]")

	// A dead first message lets the next one lead the rest back.
	run[0].Deliveries = 3
	run[2].Deliveries = 3
	s, r = newRecorder(t, run...)
	if got, err := s.Reap(ctx); err != nil || len(got) != 3 || !got[0].Dead || got[1].Dead || got[2].Dead {
		t.Fatalf("Reap = %+v, %v; want 1 dead, 2 and 3 (on its last delivery) back", got, err)
	}
	checkCalls(t, r, `kill [1] lease_expired "lease expired" true`, "running [{q k}]", `retry [2] 0s "lease expired" true false`, "hold [3] true",
		"lock [{q k}] 0", "promote [{q k}]", "notify [q]")
}

// Cancel cancels what has not finished, in input order, leaves finished
// messages as they are, and lets the next message of a cancelled head's key
// go once every cancel is done; an id of another queue changes nothing.
func TestSettleCancel(t *testing.T) {
	s, r := newRecorder(t)
	r.found = []storecore.Found{
		{ID: 4, Queue: "q", Key: "k", State: store.Waiting},
		{ID: 3, Queue: "q", Key: "k", State: store.Processing},
		{ID: 5, Queue: "q", State: store.Completed},
		{ID: 6, Queue: "other", State: store.Pending},
	}
	got, err := s.Cancel(t.Context(), "q", []int64{4, 3, 5})
	if err != nil || !slices.Equal(got, []int64{4, 3}) {
		t.Fatalf("Cancel = %v, %v; want [4 3]", got, err)
	}
	checkCalls(t, r, "cancel [4 3]", "lock [{q k}] 0", "promote [{q k}]", "notify [q]")
	r.calls = nil
	if _, err := s.Cancel(t.Context(), "q", []int64{4, 6}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Cancel of another queue's message: %v, want ErrNotFound", err)
	}
	checkCalls(t, r)
}

// A message with a dead-letter queue that dies moves there instead: the
// locks of its line where it is and where it goes are taken first, then
// it moves, then its old line's next message goes; the failure's own
// dead-letter queue wins over the message's, and the message's own queue
// leaves it dead.
func TestSettleDeadLetterQueue(t *testing.T) {
	withDLQ := keyed
	withDLQ.Deliveries, withDLQ.DeadLetterQueue = 3, "dlq"
	s, r := newRecorder(t, withDLQ, unkeyed)
	ctx := t.Context()
	if dead, err := s.Fail(ctx, store.Failure{Lease: withDLQ.Lease, Error: "boom"}); !dead || err != nil {
		t.Fatalf("Fail on the last delivery = %v, %v; want dead", dead, err)
	}
	if dead, err := s.Fail(ctx, store.Failure{Lease: unkeyed.Lease, Error: "over", Permanent: true, DeadLetterQueue: "other"}); !dead || err != nil {
		t.Fatalf("permanent Fail = %v, %v; want dead", dead, err)
	}
	arrival := "{Dead:true Reason:%s Error:%s MaxDeliveries:2147483647 DeadLetterQueue:}"
	checkCalls(t, r,
		"recorded [dlq]", "lock [{q k} {dlq k}] 0", "transfer [{1 k dlq}] "+fmt.Sprintf(arrival, "max_deliveries", "boom"), "promote [{q k}]", "notify [dlq q]",
		"recorded [other]", "transfer [{2  other}] "+fmt.Sprintf(arrival, "permanent_error", "over"), "notify [other]")

	own := unkeyed
	own.DeadLetterQueue = "q"
	s, r = newRecorder(t, own)
	if _, err := s.Fail(ctx, store.Failure{Lease: own.Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, `kill [2] max_deliveries "boom" false`)

	// A dead-letter queue without a record (deleted since the message
	// was sent) takes nothing: the message dies where it is, and its
	// error says why it stayed.
	s, r = newRecorder(t, withDLQ)
	r.deleted = []string{"dlq"}
	if dead, err := s.Fail(ctx, store.Failure{Lease: withDLQ.Lease, Error: "boom"}); !dead || err != nil {
		t.Fatalf("Fail on the last delivery = %v, %v; want dead", dead, err)
	}
	checkCalls(t, r, "recorded [dlq]", `kill [1] max_deliveries "boom; not moved to its dead-letter queue dlq, which does not exist" false`,
		"lock [{q k}] 0", "promote [{q k}]", "notify [q]")
}

// A reap moves the dead letters that have a dead-letter queue and kills
// the others, in one transaction.
func TestSettleReapDeadLetterQueue(t *testing.T) {
	withDLQ := keyed
	withDLQ.Deliveries, withDLQ.DeadLetterQueue = 3, "dlq"
	s, r := newRecorder(t, withDLQ, unkeyed)
	got, err := s.Reap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].MovedTo != "dlq" || !got[0].Dead || got[1].MovedTo != "" || !got[1].Dead {
		t.Errorf("Reap = %+v, want 1 moved to dlq and 2 dead", got)
	}
	checkCalls(t, r, "recorded [dlq]", `kill [2] lease_expired "lease expired" true`, "lock [{q k} {dlq k}] 0",
		"transfer [{1 k dlq}] {Dead:true Reason:lease_expired Error:lease expired MaxDeliveries:2147483647 DeadLetterQueue:}",
		"promote [{q k}]", "notify [dlq q]")

	// The first of a run moves: the next leads the rest back as it would
	// after a death in place, its key's head again, not waiting behind
	// the message that leaves.
	run := make([]storecore.Held, 3)
	for i := range run {
		run[i] = storecore.Held{Lease: store.Lease{MessageID: int64(i + 1), FencingToken: int64(10 + i)}, Queue: "q", Key: "k", Deliveries: 1, MaxDeliveries: 3}
	}
	run[0].Deliveries, run[0].DeadLetterQueue = 3, "dlq"
	s, r = newRecorder(t, run...)
	if got, err := s.Reap(t.Context()); err != nil || len(got) != 3 || got[0].MovedTo != "dlq" || got[1].Dead || got[2].Dead {
		t.Fatalf("Reap = %+v, %v; want 1 moved to dlq, 2 and 3 back", got, err)
	}
	checkCalls(t, r, "recorded [dlq]", "running [{q k}]", `retry [2] 0s "lease expired" true false`, "hold [3] true", "lock [{q k} {dlq k}] 0",
		"transfer [{1 k dlq}] {Dead:true Reason:lease_expired Error:lease expired MaxDeliveries:2147483647 DeadLetterQueue:}",
		"promote [{q k}]", "notify [dlq q]")

	// A deleted dead-letter queue: the message dies where it is, and is
	// reported so.
	s, r = newRecorder(t, withDLQ)
	r.deleted = []string{"dlq"}
	if got, err := s.Reap(t.Context()); err != nil || len(got) != 1 || !got[0].Dead || got[0].MovedTo != "" {
		t.Fatalf("Reap = %+v, %v; want 1 dead where it was", got, err)
	}
	checkCalls(t, r, "recorded [dlq]", `kill [1] lease_expired "lease expired; not moved to its dead-letter queue dlq, which does not exist" true`,
		"lock [{q k}] 0", "promote [{q k}]", "notify [q]")
}

// A run's order is its messages' arrivals, not their ids: a message
// moved into the queue has an older id than those that arrived before
// it. When the run's second message goes back, the third (the moved
// one, of the smallest id) goes back with it, and the first stays.
func TestSettleRunOrderIsArrival(t *testing.T) {
	run := []storecore.Held{
		{Lease: store.Lease{MessageID: 5, FencingToken: 10}, Queue: "q", Key: "k", Deliveries: 1, MaxDeliveries: 3, Arrival: 5},
		{Lease: store.Lease{MessageID: 8, FencingToken: 11}, Queue: "q", Key: "k", Deliveries: 1, MaxDeliveries: 3, Arrival: 8},
		{Lease: store.Lease{MessageID: 2, FencingToken: 12}, Queue: "q", Key: "k", Deliveries: 1, MaxDeliveries: 3, Arrival: 9},
	}
	s, r := newRecorder(t, run...)
	if dead, err := s.Fail(t.Context(), store.Failure{Lease: run[1].Lease, Error: "boom"}); dead || err != nil {
		t.Fatalf("Fail = %v, %v; want a retry", dead, err)
	}
	checkCalls(t, r, "running [{q k}]", `retry [8] 0s "boom" true false`, "hold [8] false", "hold [2] true", "notify [q]")
}

// A move of pending messages lets the next message of each moved head's
// line go, after the move.
func TestSettleMove(t *testing.T) {
	s, r := newRecorder(t)
	r.movable = []storecore.Transfer{{ID: 1, Key: "k", To: "src"}, {ID: 2, To: "src"}}
	n, err := s.Move(t.Context(), store.Move{Queue: "dlq", State: store.Pending, Limit: 5, MaxDeliveries: 7})
	if err != nil || n != 2 {
		t.Fatalf("Move = %d, %v; want 2", n, err)
	}
	checkCalls(t, r, `movable dlq pending "" 5`, "recorded [src]", "lock [{dlq k} {src k}] 0",
		"transfer [{1 k src} {2  src}] {Dead:false Reason: Error: MaxDeliveries:7 DeadLetterQueue:}", "promote [{dlq k}]", "notify [dlq src]")

	// A batch that would go to a queue without a record moves nothing.
	r.calls, r.deleted = nil, []string{"src"}
	if n, err := s.Move(t.Context(), store.Move{Queue: "dlq", State: store.Pending, Limit: 5}); !errors.Is(err, store.ErrNotFound) || n != 0 {
		t.Fatalf("Move to a deleted queue = %d, %v; want 0, ErrNotFound", n, err)
	}
	checkCalls(t, r, `movable dlq pending "" 5`, "recorded [src]")
	for _, bad := range []store.Move{
		{Queue: "dlq", State: store.Processing, Limit: 1},
		{Queue: "dlq", State: store.Pending, To: "dlq", Limit: 1},
		{Queue: "dlq", State: store.Dead, Limit: 0},
		{Queue: "dlq", State: store.Dead, To: "x", DeadLetterQueue: "x", Limit: 1},
	} {
		if _, err := s.Move(t.Context(), bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Move(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

// Rerun brings finished messages back in input order, makes a pending one
// visible now, leaves a waiting one, and wakes their queues; a processing
// message or a missing id refuses the whole batch before anything changes.
func TestSettleRerun(t *testing.T) {
	s, r := newRecorder(t)
	r.found = []storecore.Found{
		{ID: 1, Queue: "q", Key: "k", State: store.Completed},
		{ID: 2, Queue: "q", State: store.Dead},
		{ID: 3, Queue: "r", State: store.Cancelled},
		{ID: 4, Queue: "q", State: store.Pending},
		{ID: 5, Queue: "q", Key: "k", State: store.Waiting},
		{ID: 6, Queue: "q", State: store.Processing},
	}
	if err := s.Rerun(t.Context(), []int64{3, 1, 4, 5, 2}); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, "rerun [3 1 2]", "hasten [4]", "notify [q r]")
	r.calls = nil
	if err := s.Rerun(t.Context(), []int64{1, 6}); !errors.Is(err, store.ErrProcessing) {
		t.Errorf("Rerun of a processing message: %v, want ErrProcessing", err)
	}
	if err := s.Rerun(t.Context(), []int64{1, 7}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Rerun of a missing message: %v, want ErrNotFound", err)
	}
	if err := s.Rerun(t.Context(), nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Rerun of no ids: %v, want ErrInvalid", err)
	}
	checkCalls(t, r)
}

// Delete deletes messages in any state but processing and lets the next
// message of a deleted pending head's key go.
func TestSettleDelete(t *testing.T) {
	s, r := newRecorder(t)
	r.found = []storecore.Found{
		{ID: 1, Queue: "q", Key: "k", State: store.Pending},
		{ID: 2, Queue: "q", Key: "k", State: store.Waiting},
		{ID: 3, Queue: "q", Key: "j", State: store.Completed},
		{ID: 4, Queue: "q", State: store.Pending},
		{ID: 6, Queue: "q", State: store.Processing},
	}
	if err := s.Delete(t.Context(), []int64{3, 2, 1, 4}); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, "delete [3 2 1 4]", "lock [{q k}] 0", "promote [{q k}]", "notify [q]")
	r.calls = nil
	if err := s.Delete(t.Context(), []int64{6}); !errors.Is(err, store.ErrProcessing) {
		t.Errorf("Delete of a processing message: %v, want ErrProcessing", err)
	}
	checkCalls(t, r)
}

// The settlements count what they did by queue: a completion once however
// often its lease is listed, a failure that retries as failed, one on the
// last delivery or permanent as dead, and a reap's expired leases as
// failed or dead as the reaper leaves them.
func TestSettleTallies(t *testing.T) {
	other := storecore.Held{Lease: store.Lease{MessageID: 5, FencingToken: 50}, Queue: "other", Deliveries: 1, MaxDeliveries: 3}
	s, r := newRecorder(t, keyed, unkeyed, other)
	ctx := t.Context()
	if _, err := s.Complete(ctx, []store.Completion{{Lease: keyed.Lease}, {Lease: keyed.Lease}, {Lease: other.Lease}}); err != nil {
		t.Fatal(err)
	}
	want := []storecore.Tally{{Queue: "other", Completed: 1}, {Queue: "q", Completed: 1}}
	if !slices.Equal(r.tallies, want) {
		t.Fatalf("completion tallies = %+v, want %+v", r.tallies, want)
	}
	r.tallies = nil
	r.held[keyed.Lease] = keyed
	if _, err := s.Fail(ctx, store.Failure{Lease: keyed.Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, store.Failure{Lease: unkeyed.Lease, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	want = []storecore.Tally{{Queue: "q", Failed: 1}, {Queue: "q", Dead: 1}}
	if !slices.Equal(r.tallies, want) {
		t.Fatalf("failure tallies = %+v, want %+v", r.tallies, want)
	}
	r.tallies = nil
	dying := keyed
	dying.Deliveries = 3
	r.held = map[store.Lease]storecore.Held{dying.Lease: dying, other.Lease: other}
	if _, err := s.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	want = []storecore.Tally{{Queue: "other", Failed: 1}, {Queue: "q", Dead: 1}}
	if !slices.Equal(r.tallies, want) {
		t.Fatalf("reap tallies = %+v, want %+v", r.tallies, want)
	}
}
