package storecore

import (
	"sync"

	"github.com/leasehold/leasehold/store"
)

// Wakeups hands out per-queue channels that are closed when the queue may
// have claimable messages: a Store implements Wakeup with them, and its
// backend notifies them after a change commits. The zero value is ready to
// use.
type Wakeups struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

// Wakeup returns the queue's current channel.
func (w *Wakeups) Wakeup(queue string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(map[string]chan struct{})
	}
	c, ok := w.ch[queue]
	if !ok {
		c = make(chan struct{})
		w.ch[queue] = c
	}
	return c
}

// Notify wakes everyone waiting on the queue. Queues nobody waits on cost
// nothing.
func (w *Wakeups) Notify(queue string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.ch[queue]; ok {
		close(c)
		delete(w.ch, queue)
	}
}

// cancelKey keys the channel of cancellations: it names no queue.
const cancelKey = ""

// Cancellation returns the channel that is closed at the next
// NotifyCancellation (or NotifyAll).
func (w *Wakeups) Cancellation() <-chan struct{} { return w.Wakeup(cancelKey) }

// NotifyCancellation wakes everyone waiting for a cancellation.
func (w *Wakeups) NotifyCancellation() { w.Notify(cancelKey) }

// NotifyAll wakes everyone waiting on any queue, and for a cancellation.
func (w *Wakeups) NotifyAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for q, c := range w.ch {
		close(c)
		delete(w.ch, q)
	}
}

// NotifyMessages wakes the queues of msgs, each once when msgs are in
// runs of one queue (as batches usually are).
func (w *Wakeups) NotifyMessages(msgs []store.NewMessage) {
	last := ""
	for _, m := range msgs {
		if m.Queue != last {
			w.Notify(m.Queue)
			last = m.Queue
		}
	}
}
