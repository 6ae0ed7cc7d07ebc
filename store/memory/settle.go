package memory

import (
	"cmp"
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// Settle runs fn under the store's lock. The memory store has no
// rollback: its primitives never fail, and the rules check every message
// before they change one, so an error leaves nothing half done.
func (s *backend) Settle(ctx context.Context, st storecore.Settlement) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settling.now = s.clk.Now().UnixNano()
	return st.Settle(ctx, (*settleTx)(s))
}

// settleTx is the backend while Settle holds its lock: one settling step,
// at one time. It is the backend itself, so that Settle allocates nothing.
type settleTx backend

// settleState is what a settling step keeps in the backend.
type settleState struct {
	// now is the step's time.
	now int64
	// held is reused by each step's CompleteCurrent.
	held []storecore.Held
}

// b is the backend that the step is.
func (t *settleTx) b() *backend { return (*backend)(t) }

func held(m *message) storecore.Held {
	return storecore.Held{Lease: store.Lease{MessageID: m.id, FencingToken: m.fence}, Queue: m.queue.name, Key: m.key,
		Deliveries: m.deliveries, MaxDeliveries: m.maxDeliv, DeadLetterQueue: m.dlq, Arrival: m.arrival, Independent: m.independent}
}

func (t *settleTx) CompleteCurrent(_ context.Context, cs []store.Completion) ([]storecore.Held, error) {
	// In the completions' order: the rules then match them as they come.
	out := t.settling.held[:0]
	for _, c := range cs {
		// A lease listed twice finds its message completed the second time.
		if m, err := t.b().currentLocked(c.Lease, t.settling.now); err == nil {
			t.b().finishLocked(m, store.Completed, t.settling.now)
			out = append(out, held(m))
			continue
		}
		m := t.b().byIDLocked(c.MessageID)
		if !c.Late || m == nil || m.fence != c.FencingToken {
			continue
		}
		switch m.state {
		case store.Processing, store.Pending:
			t.b().finishLocked(m, store.Completed, t.settling.now)
			out = append(out, held(m))
		case store.Completed:
			h := held(m)
			h.Repeated = true
			out = append(out, h)
		}
	}
	t.settling.held = out[:0]
	return out, nil
}

func (t *settleTx) Current(_ context.Context, l store.Lease) (storecore.Held, bool, error) {
	m, err := t.b().currentLocked(l, t.settling.now)
	if err != nil {
		return storecore.Held{}, false, nil
	}
	return held(m), true, nil
}

func (t *settleTx) Given(_ context.Context, l store.Lease) (storecore.Held, bool, error) {
	m := t.b().byIDLocked(l.MessageID)
	if m == nil || m.fence != l.FencingToken || m.state != store.Processing && m.state != store.Pending {
		return storecore.Held{}, false, nil
	}
	return held(m), true, nil
}

func (t *settleTx) Expired(context.Context) ([]storecore.Held, error) {
	var out []storecore.Held
	for _, q := range t.b().queues {
		for _, m := range q.processing {
			if t.settling.now >= m.lockedUntil {
				h := held(m)
				h.StuckFor = time.Duration(t.settling.now - m.lockedUntil)
				out = append(out, h)
			}
		}
	}
	return out, nil
}

func (t *settleTx) Running(_ context.Context, lines []storecore.Line) ([]storecore.Held, error) {
	var out []storecore.Held
	for _, l := range lines {
		if line := t.b().queues[l.Queue].keys[l.Key]; line != nil {
			for _, m := range line.running {
				h := held(m)
				h.Pending = m.state == store.Pending
				out = append(out, h)
			}
		}
	}
	return out, nil
}

func (t *settleTx) Find(_ context.Context, ids []int64) ([]storecore.Found, error) {
	out := make([]storecore.Found, 0, len(ids))
	for _, id := range ids {
		if m := t.b().byIDLocked(id); m != nil {
			out = append(out, storecore.Found{ID: id, Queue: m.queue.name, Key: m.key, State: m.state})
		}
	}
	return out, nil
}

func (t *settleTx) Kill(_ context.Context, ids []int64, reason store.DeadReason, errText string, visibleNow bool) error {
	for _, id := range ids {
		m := t.b().byIDLocked(id)
		m.noteError(errText, t.settling.now)
		m.lastError, m.deadReason = errText, reason
		if visibleNow {
			m.visibleAt = t.settling.now
		}
		t.b().finishLocked(m, store.Dead, t.settling.now)
	}
	return nil
}

func (t *settleTx) Movable(_ context.Context, m store.Move) ([]storecore.Transfer, error) {
	ms := t.b().movableLocked(m, t.settling.now)
	out := make([]storecore.Transfer, len(ms))
	for i, msg := range ms {
		out[i] = storecore.Transfer{ID: msg.id, Key: msg.key, To: cmp.Or(m.To, msg.dlSource)}
	}
	return out, nil
}

func (t *settleTx) Recorded(_ context.Context, queues []string) ([]string, error) {
	var out []string
	for _, q := range queues {
		if t.records[q] != nil {
			out = append(out, q)
		}
	}
	return out, nil
}

func (t *settleTx) Transfer(_ context.Context, ts []storecore.Transfer, a storecore.Arrival) error {
	for _, tr := range ts {
		t.b().transferLocked(t.b().byIDLocked(tr.ID), tr.To, a, t.settling.now)
	}
	return nil
}

func (t *settleTx) Retry(_ context.Context, ids []int64, delay time.Duration, errText string, setError, uncount bool) error {
	for _, id := range ids {
		m := t.b().byIDLocked(id)
		if setError {
			m.noteError(errText, t.settling.now)
			m.lastError = errText
		}
		if uncount {
			m.deliveries--
		}
		t.b().requeueLocked(m, t.settling.now+int64(delay), t.settling.now)
	}
	return nil
}

func (t *settleTx) Uncount(_ context.Context, ids []int64) error {
	for _, id := range ids {
		t.b().byIDLocked(id).deliveries--
	}
	return nil
}

func (t *settleTx) Hold(_ context.Context, ids []int64, uncount bool) error {
	for _, id := range ids {
		m := t.b().byIDLocked(id)
		q := m.queue
		delete(q.processing, m.id)
		q.removePending(m)
		line := q.keys[m.key]
		line.running = removeMessage(line.running, m)
		line.waiting = insertByArrival(line.waiting, m)
		q.setState(m, store.Waiting)
		m.lockedUntil = 0
		m.fence = 0 // its claim's handle, lost now, never completes it late
		if uncount {
			m.deliveries--
		}
	}
	return nil
}

func (t *settleTx) Cancel(_ context.Context, ids []int64) error {
	for _, id := range ids {
		m := t.b().byIDLocked(id)
		if m.state != store.Waiting {
			t.b().finishLocked(m, store.Cancelled, t.settling.now)
			continue
		}
		line := m.queue.keys[m.key]
		line.waiting = removeMessage(line.waiting, m)
		if len(line.running) == 0 && len(line.waiting) == 0 {
			delete(m.queue.keys, m.key)
		}
		m.queue.setState(m, store.Cancelled)
		m.finishedAt = t.settling.now
	}
	return nil
}

func (t *settleTx) Rerun(_ context.Context, ms []storecore.Found) error {
	now := t.settling.now
	for _, f := range ms {
		m := t.b().byIDLocked(f.ID)
		m.queue.dropCompleted(m)
		m.queue.setState(m, store.Pending)
		m.deliveries, m.deadReason, m.finishedAt, m.lockedUntil = 0, "", 0, 0
		m.fence = 0 // no lease from before it finished completes it late
		m.visibleAt = now
		t.b().lineUpLocked(m, now)
	}
	return nil
}

func (t *settleTx) Hasten(_ context.Context, ids []int64) error {
	now := t.settling.now
	for _, id := range ids {
		if m := t.b().byIDLocked(id); m.visibleAt > now {
			m.queue.removePending(m)
			m.visibleAt = now
			m.queue.pushPending(m, now)
		}
	}
	return nil
}

func (t *settleTx) Snoozed(_ context.Context, id int64) error {
	t.b().byIDLocked(id).snoozes++
	return nil
}

func (t *settleTx) Delete(_ context.Context, ms []storecore.Found) error {
	for _, f := range ms {
		m := t.b().byIDLocked(f.ID)
		q := m.queue
		q.dropCompleted(m)
		q.removePending(m)
		q.leaveLine(m)
		t.b().deleteLocked(m)
	}
	t.b().trimLocked()
	return nil
}

// Lock takes nothing: the store's lock is held.
func (*settleTx) Lock(context.Context, []storecore.Line, []store.NewMessage) error { return nil }

func (t *settleTx) Promote(_ context.Context, lines []storecore.Line) error {
	for _, l := range lines {
		q := t.b().queues[l.Queue]
		line := q.keys[l.Key]
		if line == nil || len(line.waiting) == 0 || !line.free(line.waiting[0]) {
			continue
		}
		next := line.waiting[0]
		line.waiting = line.waiting[1:]
		line.running = insertByArrival(line.running, next)
		q.setState(next, store.Pending)
		q.pushPending(next, t.settling.now)
	}
	return nil
}

func (t *settleTx) Insert(_ context.Context, msgs []store.NewMessage) error {
	for i := range msgs {
		t.b().enqueueLocked(&msgs[i], t.settling.now)
	}
	return nil
}

// Notify tells no one: the memory store has one process, which the caller
// wakes.
func (*settleTx) Notify(context.Context, []string) error { return nil }

// free reports whether w, the line's first waiting message, may become
// its head: the line has no pending message, and none processing that
// was claimed without an independent lease or that comes before w.
func (line *keyLine) free(w *message) bool {
	for _, r := range line.running {
		if r.state == store.Pending || !r.independent || r.arrival < w.arrival {
			return false
		}
	}
	return true
}
