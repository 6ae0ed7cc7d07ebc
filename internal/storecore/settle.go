package storecore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/store"
)

// This file holds the state machine of a message once it is claimed or
// cancelled: which state each outcome leads to, which key's next message
// goes, which replies are sent and which queues are woken. The backends
// supply the primitives, as a SettleTx, each inside one transaction (or
// under one lock); the rules are written here once.
//
//	pending ──claim──▶ processing ──complete──▶ completed
//	   ▲                  │  │ └──fail, last delivery or permanent──▶ dead
//	   └──fail, retries───┘  └──lease expired (reap)──▶ pending, or dead on the last delivery
//	waiting ──its key's head finished──▶ pending
//	waiting ──claim with runs, behind its key's head──▶ processing
//	processing ──an earlier message of its run went back──▶ waiting (not when claimed independent)
//	pending, waiting, processing ──cancel──▶ cancelled
//	dead, of a message with a dead-letter queue ══▶ pending or waiting there instead
//	pending (visible), dead ──move──▶ pending or waiting in another queue
//	completed, dead, cancelled ──rerun──▶ pending, or waiting behind its key's head
//	any but processing ──delete──▶ gone

// Held is a claimed message as a settling transaction found it: under its
// current lease, and locked until the transaction ends.
type Held struct {
	store.Lease
	Queue string
	// Key is the message's key; empty for none.
	Key           string
	Deliveries    int
	MaxDeliveries int
	// StuckFor is how long the lease has been expired; set by Expired only.
	StuckFor time.Duration
	// Repeated marks a message that CompleteCurrent found completed under
	// a Late completion's token already: it changed nothing.
	Repeated bool
	// DeadLetterQueue is where the message moves when it dies; empty for
	// none (see store.NewMessage). Set by Current and Expired.
	DeadLetterQueue string
	// Arrival is the message's place in its key's line: the number drawn
	// when it arrived in its queue (its id, or a later number from the
	// same sequence when it was moved there), so that a moved message
	// goes after every message of its key already there. Set by
	// Current, Given, Expired and Running.
	Arrival int64
	// Independent says the message was claimed with independent leases
	// (see store.Claim): its return brings back none of its key's later
	// messages, and another's return does not bring it back. Set by
	// Current, Given, Expired and Running.
	Independent bool
	// Pending marks a message that Running found pending, its key's
	// head, rather than processing.
	Pending bool
}

// Transfer is a message that a settling transaction moves to another
// queue: a dead letter to its dead-letter queue, or one that Move moves.
type Transfer struct {
	ID int64
	// Key is the message's key, for the lock of its line in To.
	Key string
	To  string
}

// Arrival says what transferred messages become in their new queue.
type Arrival struct {
	// Dead says they were dead-lettered: Reason and Error are recorded and
	// the queue each leaves becomes its dead-letter source. Else their
	// dead reason and dead-letter source are cleared.
	Dead   bool
	Reason store.DeadReason
	Error  string
	// MaxDeliveries and DeadLetterQueue are their budget and dead-letter
	// queue from now on (empty for none).
	MaxDeliveries   int
	DeadLetterQueue string
}

// Line names a key's line of messages: its head runs, the rest wait.
type Line struct{ Queue, Key string }

// Found is a message that Cancel found by id, locked.
type Found struct {
	ID    int64
	Queue string
	Key   string
	State store.State
}

// SettleTx is what a backend does inside one settling transaction, at its
// time authority's now. Ids passed to the methods that change messages are
// of messages the transaction has found and locked (through
// CompleteCurrent, Current, Expired or Find). A slice a primitive returns
// may be reused by the next transaction: it is read within this one only.
type SettleTx interface {
	// CompleteCurrent completes the messages of those of the completions'
	// leases that hold them and returns them, each message once, in any
	// order; it ignores their replies. A lease holds its message when it
	// is current; for a Late completion, also when the message is still
	// processing under its token after the lease expired, or pending
	// under it (given back, not claimed since). Of the Late completions
	// whose message is completed under their token already, it returns
	// the message too, unchanged, with Repeated set. It is one step so
	// that a backend can fence and finish a batch in one statement.
	CompleteCurrent(ctx context.Context, cs []store.Completion) ([]Held, error)
	// Current returns the message of a lease if the lease is current.
	Current(ctx context.Context, l store.Lease) (Held, bool, error)
	// Given returns the message of a lease, locked, if no claim has taken
	// it since: it is processing under the lease's token, whatever the
	// expiry, or pending under it.
	Given(ctx context.Context, l store.Lease) (Held, bool, error)
	// Expired returns the processing messages whose leases have run out,
	// passing over those another transaction holds locked.
	Expired(ctx context.Context) ([]Held, error)
	// Running returns the pending and processing messages of the lines,
	// in any order, the pending ones marked: a run's messages, of which
	// those after one that goes back go back with it (unless claimed
	// independent), and the head that a message going back must wait
	// behind.
	Running(ctx context.Context, lines []Line) ([]Held, error)
	// Find returns the messages with the ids, in any order, leaving out
	// ids that name none; a backend that locks keys takes the locks of
	// their keys before it locks them.
	Find(ctx context.Context, ids []int64) ([]Found, error)
	// Kill dead-letters messages with a reason and an error. With
	// visibleNow, their visible time becomes now, as a reaped message's
	// always does.
	Kill(ctx context.Context, ids []int64, reason store.DeadReason, errText string, visibleNow bool) error
	// Movable finds and locks up to m.Limit messages that m selects (a
	// checked store.Move), in its order, each with the queue it goes to;
	// a backend that locks keys takes the locks of their lines, in their
	// queue and in the one they go to, before it locks them.
	Movable(ctx context.Context, m store.Move) ([]Transfer, error)
	// Recorded returns those of the queues that have a record (see
	// store.Store.CreateQueue), in any order, and keeps those records
	// from being deleted until the transaction ends, so that no message
	// moves into a queue that DeleteQueue is deleting.
	Recorded(ctx context.Context, queues []string) ([]string, error)
	// Transfer moves messages to other queues as a arrives: each is
	// visible now, pending, or waiting when its new queue has an
	// unfinished message of its key, and draws a new arrival (see
	// Held.Arrival), after every message there; its dedup id and finish
	// time are cleared, and so are its deliveries and first claim unless
	// a.Dead (a dead letter keeps them). Lock has taken the locks of
	// their lines in their new queues.
	Transfer(ctx context.Context, ts []Transfer, a Arrival) error
	// Retry makes messages pending again, visible after delay. When
	// setError, errText becomes their last error; else it is kept. With
	// uncount, each takes back the delivery its claim counted.
	Retry(ctx context.Context, ids []int64, delay time.Duration, errText string, setError, uncount bool) error
	// Uncount takes back the delivery each message's claim counted,
	// changing nothing else.
	Uncount(ctx context.Context, ids []int64) error
	// Hold puts processing or pending messages back in their keys' lines
	// as Waiting, keeping their visible time, so that their leases are
	// lost; with uncount, each takes back the delivery its claim counted.
	Hold(ctx context.Context, ids []int64, uncount bool) error
	// Cancel cancels messages: pending, waiting or processing ones.
	Cancel(ctx context.Context, ids []int64) error
	// Rerun brings finished messages (completed, dead or cancelled), as
	// Find found them, back as store.Store.Redrive brings back a dead
	// one, one after another in their order, so that each finds those
	// before it in its key's line; it takes the completed ones off their
	// queues' counts.
	Rerun(ctx context.Context, ms []Found) error
	// Hasten makes pending messages that are not visible yet visible now.
	Hasten(ctx context.Context, ids []int64) error
	// Snoozed counts a snooze of the message (store.Info.Snoozes).
	Snoozed(ctx context.Context, id int64) error
	// Delete deletes messages that are not processing, as Find found
	// them, taking the completed ones off their queues' counts.
	Delete(ctx context.Context, ms []Found) error
	// Lock takes the locks that promoting lines and inserting msgs need,
	// all in one call, so that two transactions never wait on each other.
	Lock(ctx context.Context, lines []Line, msgs []store.NewMessage) error
	// Promote lets the oldest waiting message of each line go, where the
	// line has no message pending, and none processing that was claimed
	// without independent leases or that comes before it: a key stays
	// busy while any message of a run is processing, unless its run's
	// leases are independent, and then only while one before it is.
	Promote(ctx context.Context, lines []Line) error
	// Insert enqueues messages (replies), already checked, and tells other
	// processes of their queues.
	Insert(ctx context.Context, msgs []store.NewMessage) error
	// Notify tells other processes that messages of the queues may have
	// become claimable, once the transaction commits.
	Notify(ctx context.Context, queues []string) error
	// Tally adds the counts to their queues' minute of the transaction's
	// now (see store.Store.Throughput): each queue once, sorted by queue,
	// with a count that is not zero. A backend may write them last in
	// the transaction, after every other lock it takes.
	Tally(ctx context.Context, ts []Tally) error
}

// Tally is what one settling transaction did to a queue's messages, for
// its throughput.
type Tally struct {
	Queue                   string
	Completed, Failed, Dead int64
}

// tallies count a settling transaction's outcomes by queue.
type tallies map[string]*Tally

func (ts *tallies) of(queue string) *Tally {
	if *ts == nil {
		*ts = tallies{}
	}
	t := (*ts)[queue]
	if t == nil {
		t = &Tally{Queue: queue}
		(*ts)[queue] = t
	}
	return t
}

// write hands the counts to tx, sorted by queue, when there are any.
func (ts tallies) write(ctx context.Context, tx SettleTx) error {
	if len(ts) == 0 {
		return nil
	}
	out := make([]Tally, 0, len(ts))
	for _, t := range ts {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Tally) int { return cmp.Compare(a.Queue, b.Queue) })
	return tx.Tally(ctx, out)
}

// A Settlement is the work of one settling transaction, which
// Backend.Settle runs: a completion batch, a failure, a reap or a cancel.
type Settlement interface {
	Settle(ctx context.Context, tx SettleTx) error
	// woken returns the queues whose receivers in this process to wake
	// once the transaction has committed.
	woken() []string
}

// settled is what every Settlement keeps: the queues to wake.
type settled struct{ wake []string }

func (w *settled) add(queues ...string) { w.wake = append(w.wake, queues...) }

func (w *settled) woken() []string { return w.wake }

// lastDelivery reports whether a held message's delivery was the last it
// is allowed: a failure, or a lease that expires, then dead-letters it.
func lastDelivery(h Held) bool { return h.Deliveries >= h.MaxDeliveries }

// leaseExpiredError is recorded on a message dead-lettered because the
// lease of its last delivery expired.
const leaseExpiredError = "lease expired"

// transfers are the messages a settling transaction moves to other
// queues, and what they become there.
type transfers struct {
	ts []Transfer
	as Arrival
}

// deadLetters is what a message dead-lettered for reason with errText
// becomes in its dead-letter queue: a dead letter that the target's own
// rules, not the source's, govern.
func deadLetters(reason store.DeadReason, errText string) transfers {
	return transfers{as: Arrival{Dead: true, Reason: reason, Error: errText, MaxDeliveries: store.MaxDeliveriesLimit}}
}

// deadLetterQueue is where a held message that dies goes: the failure's
// queue, else its own; empty (dead where it is) for its own queue.
func deadLetterQueue(h Held, override string) string {
	if to := cmp.Or(override, h.DeadLetterQueue); to != h.Queue {
		return to
	}
	return ""
}

// after moves the transferred messages, lets the next message of each
// line whose head this transaction finished or moved go and sends the
// replies, taking every lock first; then it tells other processes of the
// queues where messages may have become claimable (the lines', the
// transfers' targets, and those given), and notes them and the replies'
// queues for this process's receivers.
func (w *settled) after(ctx context.Context, tx SettleTx, lines []Line, replies []store.NewMessage, queues []string, moves transfers) error {
	locks := lines
	if len(moves.ts) > 0 {
		locks = slices.Clone(lines)
		for _, t := range moves.ts {
			if t.Key != "" {
				locks = append(locks, Line{t.To, t.Key})
			}
			queues = append(queues, t.To)
		}
	}
	if len(locks) > 0 || len(replies) > 0 {
		if err := tx.Lock(ctx, locks, replies); err != nil {
			return err
		}
	}
	if len(moves.ts) > 0 {
		if err := tx.Transfer(ctx, moves.ts, moves.as); err != nil {
			return err
		}
	}
	if len(lines) > 0 {
		if err := tx.Promote(ctx, lines); err != nil {
			return err
		}
		for _, l := range lines {
			queues = append(queues, l.Queue)
		}
	}
	if len(queues) > 0 {
		queues = distinct(queues)
		if err := tx.Notify(ctx, queues); err != nil {
			return err
		}
		w.add(queues...)
	}
	if len(replies) > 0 {
		if err := tx.Insert(ctx, replies); err != nil {
			return err
		}
		for _, m := range replies {
			w.add(m.Queue)
		}
	}
	return nil
}

// completion completes each completion whose lease is current, once
// however often the batch lists it, and sends its reply. Its results hold
// one entry per completion: nil, or the lost lease's error.
type completion struct {
	settled
	cs      []store.Completion
	results []error
}

func (cp *completion) Settle(ctx context.Context, tx SettleTx) error {
	cs, results := cp.cs, cp.results
	asked := cs
	if slices.ContainsFunc(cs, unminted) {
		asked = slices.DeleteFunc(slices.Clone(cs), unminted)
	}
	done, err := tx.CompleteCurrent(ctx, asked)
	if err != nil {
		return err
	}
	var lines []Line
	var replies []store.NewMessage
	complete := func(i int, h Held) {
		results[i] = nil
		if h.Repeated {
			return // completed before, under the same lease: nothing to do again
		}
		if h.Key != "" {
			lines = append(lines, Line{h.Queue, h.Key})
		}
		if c := cs[i]; c.Reply != nil {
			replies = append(replies, *c.Reply)
		}
	}
	// A backend that returns the completed messages in the completions'
	// order (the memory store does) is matched as it comes; any other
	// order, by search. Either way a lease listed twice completes once:
	// the first completion that lists it gets its message.
	// A late completion that the first pass found lost may be a repeat
	// of one listed before it: the search tells.
	j, lateLost := 0, false
	for i, c := range cs {
		if j < len(done) && done[j].Lease == c.Lease {
			complete(i, done[j])
			j++
		} else {
			results[i] = errLost
			lateLost = lateLost || c.Late
		}
	}
	if j < len(done) || lateLost && len(done) > 0 {
		lines, replies = lines[:0], replies[:0]
		slices.SortFunc(done, func(a, b Held) int { return compareLeases(a.Lease, b.Lease) })
		reported := make([]bool, len(done))
		for i, c := range cs {
			j, ok := slices.BinarySearchFunc(done, c.Lease, func(h Held, l store.Lease) int { return compareLeases(h.Lease, l) })
			if ok && reported[j] && c.Late {
				results[i] = nil // a late completion repeated: a success that changes nothing
				continue
			}
			if !ok || reported[j] {
				results[i] = errLost
				continue
			}
			reported[j] = true
			complete(i, done[j])
		}
	}
	for i, err := range results {
		if err == errLost {
			results[i] = store.LeaseLost(cs[i].Lease)
		}
	}
	var counts tallies
	for _, h := range done {
		if !h.Repeated {
			counts.of(h.Queue).Completed++
		}
	}
	if err := counts.write(ctx, tx); err != nil {
		return err
	}
	return cp.after(ctx, tx, distinctLines(lines), replies, nil, transfers{})
}

// errLost marks a completion found lost, until the matching is over: the
// first pass finds most completions lost when the backend returns its
// messages in another order, and the error that names a lease is made
// only for those still lost at the end.
var errLost = errors.New("lost")

// unminted reports a late completion under a token no claim mints (a
// claim's token is at least 1): it names no handle ever given out, but a
// message never claimed, or one moved or redriven since, which holds
// token 0; so it is lost, whatever the message's state.
func unminted(c store.Completion) bool { return c.Late && c.FencingToken < 1 }

func compareLeases(a, b store.Lease) int {
	return cmp.Or(cmp.Compare(a.MessageID, b.MessageID), cmp.Compare(a.FencingToken, b.FencingToken))
}

// failure retries a failed message or dead-letters it, and sends the
// reply of a failure that dead-letters; dead says which.
type failure struct {
	settled
	f    store.Failure
	dead bool
}

func (fl *failure) Settle(ctx context.Context, tx SettleTx) error {
	f := fl.f
	h, ok, err := tx.Current(ctx, f.Lease)
	if err != nil {
		return err
	}
	if !ok {
		return store.LeaseLost(f.Lease)
	}
	if f.Uncount {
		if err := tx.Uncount(ctx, []int64{h.MessageID}); err != nil {
			return err
		}
		h.Deliveries--
	}
	var counts tallies
	if fl.dead = f.Permanent || lastDelivery(h); !fl.dead {
		if err := giveBack(ctx, tx, []Held{h}, f.RetryDelay, f.Error, true, false, nil); err != nil {
			return err
		}
		counts.of(h.Queue).Failed++
		if err := counts.write(ctx, tx); err != nil {
			return err
		}
		return fl.after(ctx, tx, nil, nil, []string{h.Queue}, transfers{})
	}
	counts.of(h.Queue).Dead++
	if err := counts.write(ctx, tx); err != nil {
		return err
	}
	// A message with a dead-letter queue moves there, in after, once
	// the locks of its line there are taken; any other dies here.
	moves := deadLetters(f.Reason, f.Error)
	if to := deadLetterQueue(h, f.DeadLetterQueue); to != "" {
		moves.ts = []Transfer{{ID: h.MessageID, Key: h.Key, To: to}}
		if moves, _, err = toRecorded(ctx, tx, moves, false); err != nil {
			return err
		}
	} else if err := tx.Kill(ctx, []int64{h.MessageID}, f.Reason, f.Error, false); err != nil {
		return err
	}
	var lines []Line
	if h.Key != "" {
		lines = []Line{{h.Queue, h.Key}}
	}
	var replies []store.NewMessage
	if f.Reply != nil {
		replies = []store.NewMessage{*f.Reply}
	}
	// The failed message's queue is woken in this process even without a
	// key: its receivers learn at once that the lease is gone.
	fl.add(h.Queue)
	return fl.after(ctx, tx, lines, replies, nil, moves)
}

// release gives a message back uncounted, or late (a counted release
// that is not late is a failure).
type release struct {
	settled
	r store.Release
}

func (rl *release) Settle(ctx context.Context, tx SettleTx) error {
	find := tx.Current
	if rl.r.Late {
		if rl.r.FencingToken < 1 {
			return store.LeaseLost(rl.r.Lease) // as for a late completion: see unminted
		}
		find = tx.Given
	}
	h, ok, err := find(ctx, rl.r.Lease)
	if err != nil {
		return err
	}
	if !ok {
		return store.LeaseLost(rl.r.Lease)
	}
	if err := giveBack(ctx, tx, []Held{h}, rl.r.Delay, "", false, rl.r.Uncount, nil); err != nil {
		return err
	}
	if rl.r.Snooze {
		if err := tx.Snoozed(ctx, h.MessageID); err != nil {
			return err
		}
	}
	return rl.after(ctx, tx, nil, nil, []string{h.Queue}, transfers{})
}

// giveBack returns processing messages to the queue, visible after
// delay, with errText as their last error when setError, and their
// deliveries taken back when uncount. A message of a key brings back
// the later messages of its key that are still processing and were not
// claimed independent (see store.Claim), the rest of its run: those wait
// behind it, their leases lost and their deliveries taken back, so that
// a message that keeps failing does not use up the budgets of those
// claimed with it. Those claimed independent keep their leases. The
// first message of a key that goes back is its head again, pending,
// unless the key has a pending head already or an earlier message of the
// key is still processing: then it waits too, and goes when the key is
// free. The key's other messages going back in the same step wait behind
// it: those claimed independent go back on their own, as the first does;
// the others are brought back by it. The messages of leaving are going
// to other queues in this transaction (in after, as dead letters): still
// processing, they count as finished.
func giveBack(ctx context.Context, tx SettleTx, hs []Held, delay time.Duration, errText string, setError, uncount bool, leaving map[int64]bool) error {
	var lines []Line
	first := map[Line]Held{} // each key's first message that goes back, by its place in the line
	back := map[int64]bool{}
	for _, h := range hs {
		if h.Key == "" {
			continue
		}
		back[h.MessageID] = true
		l := Line{h.Queue, h.Key}
		if f, ok := first[l]; !ok || h.Arrival < f.Arrival {
			if !ok {
				lines = append(lines, l)
			}
			first[l] = h
		}
	}
	var pending, waiting, brought []int64
	busy := map[Line]bool{}
	if len(lines) > 0 {
		running, err := tx.Running(ctx, lines)
		if err != nil {
			return err
		}
		for _, r := range running {
			l := Line{r.Queue, r.Key}
			f, ok := first[l]
			switch {
			case !ok, leaving[r.MessageID], r.MessageID == f.MessageID:
			case r.Pending && !back[r.MessageID], r.Arrival < f.Arrival:
				busy[l] = true // the key has a head, or an earlier message of it is still processing
			case r.Independent:
				// Its lease stands on its own: it stays, or goes back
				// on its own below.
			default:
				brought = append(brought, r.MessageID)
			}
		}
	}
	for _, h := range hs {
		l := Line{h.Queue, h.Key}
		switch {
		case h.Key == "":
			pending = append(pending, h.MessageID)
		case first[l].MessageID != h.MessageID:
			if h.Independent {
				waiting = append(waiting, h.MessageID)
			}
			// Else brought back by its key's first, which Running found
			// processing with it.
		case busy[l]:
			waiting = append(waiting, h.MessageID)
		default:
			pending = append(pending, h.MessageID)
		}
	}
	if ids := append(pending, waiting...); len(ids) > 0 {
		if err := tx.Retry(ctx, ids, delay, errText, setError, uncount); err != nil {
			return err
		}
	}
	if len(waiting) > 0 {
		if err := tx.Hold(ctx, waiting, false); err != nil {
			return err
		}
	}
	if len(brought) > 0 {
		slices.Sort(brought)
		if err := tx.Hold(ctx, brought, true); err != nil {
			return err
		}
	}
	return nil
}

// reaping takes back the messages whose leases expired: pending again,
// at once, or dead on their last delivery, as a failure would leave them,
// "lease expired" their last error either way.
// Of a key's expired messages, those after the first that goes back go
// back with it, as the rest of its run, and are not dead-lettered,
// unless they were claimed independent: each of those is judged on its
// own. It reports them in recovered.
type reaping struct {
	settled
	recovered []store.Recovered
}

func (rp *reaping) Settle(ctx context.Context, tx SettleTx) error {
	expired, err := tx.Expired(ctx)
	if err != nil || len(expired) == 0 {
		return err
	}
	// In their lines' order, so that a key's first expired message is
	// the one that may die and the rest go back with it.
	slices.SortFunc(expired, func(a, b Held) int { return cmp.Compare(a.Arrival, b.Arrival) })
	out := make([]store.Recovered, len(expired))
	var back []Held
	var dead []int64
	var lines []Line
	moves := deadLetters(store.ReasonLeaseExpired, leaseExpiredError)
	queues := make([]string, 0, len(expired))
	goingBack := map[Line]bool{}
	for i, h := range expired {
		l := Line{h.Queue, h.Key}
		r := store.Recovered{ID: h.MessageID, Queue: h.Queue, StuckFor: h.StuckFor}
		r.Dead = lastDelivery(h) && (h.Independent || !(h.Key != "" && goingBack[l]))
		if r.Dead {
			if r.MovedTo = deadLetterQueue(h, ""); r.MovedTo != "" {
				moves.ts = append(moves.ts, Transfer{ID: h.MessageID, Key: h.Key, To: r.MovedTo})
			} else {
				dead = append(dead, h.MessageID)
			}
			if h.Key != "" {
				lines = append(lines, l)
			}
		} else {
			back = append(back, h)
			if h.Key != "" {
				goingBack[l] = true
			}
		}
		out[i] = r
		queues = append(queues, h.Queue)
	}
	moves, stayed, err := toRecorded(ctx, tx, moves, true)
	if err != nil {
		return err
	}
	for i := range out {
		if stayed[out[i].ID] {
			out[i].MovedTo = ""
		}
	}
	// The dead first, so that giveBack finds them finished; those that
	// move, which after moves once it holds the locks of their lines in
	// their dead-letter queues, giveBack counts as finished.
	if len(dead) > 0 {
		if err := tx.Kill(ctx, dead, store.ReasonLeaseExpired, leaseExpiredError, true); err != nil {
			return err
		}
	}
	if len(back) > 0 {
		var leaving map[int64]bool
		if len(moves.ts) > 0 {
			leaving = make(map[int64]bool, len(moves.ts))
			for _, t := range moves.ts {
				leaving[t.ID] = true
			}
		}
		if err := giveBack(ctx, tx, back, 0, leaseExpiredError, true, false, leaving); err != nil {
			return err
		}
	}
	var counts tallies
	for _, r := range out {
		if r.Dead {
			counts.of(r.Queue).Dead++
		} else {
			counts.of(r.Queue).Failed++
		}
	}
	if err := counts.write(ctx, tx); err != nil {
		return err
	}
	rp.recovered = out
	return rp.after(ctx, tx, distinctLines(lines), nil, queues, moves)
}

// cancellation cancels the messages of the ids that have not finished,
// and lets the next message of each cancelled head's line go; cancelled
// lists them in input order. Every id must name a message of the queue
// (any queue when it is empty).
type cancellation struct {
	settled
	queue     string
	ids       []int64
	cancelled []int64
}

func (cn *cancellation) Settle(ctx context.Context, tx SettleTx) error {
	queue, ids := cn.queue, cn.ids
	found, err := tx.Find(ctx, ids)
	if err != nil {
		return err
	}
	byID := make(map[int64]Found, len(found))
	for _, f := range found {
		byID[f.ID] = f
	}
	var out []int64
	var lines []Line
	for _, id := range ids { // each once: the ids are checked
		f, ok := byID[id]
		if !ok || queue != "" && f.Queue != queue {
			return NoMessage(queue, id)
		}
		switch f.State {
		case store.Pending, store.Processing:
			if f.Key != "" {
				lines = append(lines, Line{f.Queue, f.Key})
			}
		case store.Waiting:
		default:
			continue // finished already: left as it is
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		return nil
	}
	if err := tx.Cancel(ctx, out); err != nil {
		return err
	}
	cn.cancelled = out
	// Every cancel first, then the lines' next messages: one cancelled
	// here too must not become a head.
	return cn.after(ctx, tx, distinctLines(lines), nil, nil, transfers{})
}

// moving moves the messages a store.Move selects to their new queues, and
// lets the next message of each moved head's line go; moved counts them.
type moving struct {
	settled
	m     store.Move
	moved int
}

func (mv *moving) Settle(ctx context.Context, tx SettleTx) error {
	ts, err := tx.Movable(ctx, mv.m)
	if err != nil || len(ts) == 0 {
		return err
	}
	// Every queue the batch goes to must have a record, or none of it
	// moves: a deleted queue never comes back with messages in it.
	targets := targetsOf(ts)
	recorded, err := tx.Recorded(ctx, targets)
	if err != nil {
		return err
	}
	if len(recorded) < len(targets) {
		for _, q := range targets {
			if !slices.Contains(recorded, q) {
				return NoQueue(q)
			}
		}
	}
	var lines []Line
	if mv.m.State == store.Pending {
		// A pending message with a key heads its line.
		for _, t := range ts {
			if t.Key != "" {
				lines = append(lines, Line{mv.m.Queue, t.Key})
			}
		}
	}
	mv.moved = len(ts)
	moves := transfers{ts: ts, as: Arrival{MaxDeliveries: mv.m.MaxDeliveries, DeadLetterQueue: mv.m.DeadLetterQueue}}
	return mv.after(ctx, tx, distinctLines(lines), nil, nil, moves)
}

// targetsOf lists, sorted, the queues that transfers go to, each once.
func targetsOf(ts []Transfer) []string {
	to := make([]string, len(ts))
	for i, t := range ts {
		to[i] = t.To
	}
	return distinct(to)
}

// toRecorded keeps the dead letters of moves whose dead-letter queues
// have a record; the others, whose queue was deleted (or never
// created), die in their own queues instead, with their reason and an
// error that names the missing queue, visible now with visibleNow (see
// Kill). So no message is lost, and a deleted queue never comes back
// with messages in it. It returns the moves that go ahead and the ids of
// the messages that stayed.
func toRecorded(ctx context.Context, tx SettleTx, moves transfers, visibleNow bool) (transfers, map[int64]bool, error) {
	if len(moves.ts) == 0 {
		return moves, nil, nil
	}
	targets := targetsOf(moves.ts)
	recorded, err := tx.Recorded(ctx, targets)
	if err != nil || len(recorded) == len(targets) {
		return moves, nil, err
	}
	stayed := map[int64]bool{}
	kept := make([]Transfer, 0, len(moves.ts))
	for _, q := range targets {
		if slices.Contains(recorded, q) {
			continue
		}
		var ids []int64
		for _, t := range moves.ts {
			if t.To == q {
				ids = append(ids, t.ID)
				stayed[t.ID] = true
			}
		}
		errText := fmt.Sprintf("not moved to its dead-letter queue %s, which does not exist", q)
		if moves.as.Error != "" {
			errText = moves.as.Error + "; " + errText
		}
		if err := tx.Kill(ctx, ids, moves.as.Reason, errText, visibleNow); err != nil {
			return moves, nil, err
		}
	}
	for _, t := range moves.ts {
		if !stayed[t.ID] {
			kept = append(kept, t)
		}
	}
	moves.ts = kept
	return moves, stayed, nil
}

// distinct sorts names and drops repeats, in place.
func distinct(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}

func distinctLines(lines []Line) []Line {
	slices.SortFunc(lines, func(a, b Line) int { return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Key, b.Key)) })
	return slices.Compact(lines)
}

// foundAll finds the messages of ids, locked, in input order: every id must
// name a message, and none may be processing, for an operation that
// refuses those (op names it in the error).
func foundAll(ctx context.Context, tx SettleTx, op string, ids []int64) ([]Found, error) {
	found, err := tx.Find(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]Found, len(found))
	for _, f := range found {
		byID[f.ID] = f
	}
	out := make([]Found, len(ids))
	for i, id := range ids {
		f, ok := byID[id]
		if !ok {
			return nil, NoMessage("", id)
		}
		if f.State == store.Processing {
			return nil, fmt.Errorf("%w: cannot %s message %d of queue %q", store.ErrProcessing, op, id, f.Queue)
		}
		out[i] = f
	}
	return out, nil
}

// rerunning makes messages run again now (see store.Store.Rerun).
type rerunning struct {
	settled
	ids []int64
}

func (rr *rerunning) Settle(ctx context.Context, tx SettleTx) error {
	found, err := foundAll(ctx, tx, "rerun", rr.ids)
	if err != nil {
		return err
	}
	var back []Found
	var hasten []int64
	var queues []string
	for _, f := range found {
		switch f.State {
		case store.Completed, store.Dead, store.Cancelled:
			back = append(back, f)
		case store.Pending:
			hasten = append(hasten, f.ID)
		default:
			continue // waiting: its line says when it runs
		}
		queues = append(queues, f.Queue)
	}
	if len(back) > 0 {
		if err := tx.Rerun(ctx, back); err != nil {
			return err
		}
	}
	if len(hasten) > 0 {
		if err := tx.Hasten(ctx, hasten); err != nil {
			return err
		}
	}
	return rr.after(ctx, tx, nil, nil, queues, transfers{})
}

// deleting deletes messages that are not processing, and lets the next
// message of each deleted head's line go.
type deleting struct {
	settled
	ids []int64
}

func (dl *deleting) Settle(ctx context.Context, tx SettleTx) error {
	found, err := foundAll(ctx, tx, "delete", dl.ids)
	if err != nil {
		return err
	}
	var lines []Line
	for _, f := range found {
		if f.State == store.Pending && f.Key != "" {
			lines = append(lines, Line{f.Queue, f.Key}) // a pending message with a key heads its line
		}
	}
	if err := tx.Delete(ctx, found); err != nil {
		return err
	}
	return dl.after(ctx, tx, distinctLines(lines), nil, nil, transfers{})
}
