// Package mailbox is a long-polling claim on one queue: Receive claims
// messages under a lease, and when there are none waits for them, woken at
// once by an enqueue in this process and looking again every poll interval
// for those of other processes. What becomes of a received message is the
// store's to say: Complete, Fail or Release, fenced by the message's
// lease.
package mailbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// DefaultPollInterval is how often a long poll looks again when nothing in
// this process signalled new messages.
const DefaultPollInterval = time.Second

// Config configures a Mailbox; nothing in it is checked or defaulted.
type Config struct {
	// Store holds the messages.
	Store store.Store
	// Queue is the queue's name.
	Queue string
	// WorkerID names the receiver in leases (see NewWorkerID).
	WorkerID string
	// PollInterval bounds how long a long poll waits between claims when no
	// wakeup arrives, which is how messages enqueued by other processes (or
	// becoming visible after a delay) are noticed (see DefaultPollInterval).
	PollInterval time.Duration
	// Clock times long polls.
	Clock clock.Clock
}

// Mailbox receives from one queue. It is safe for concurrent use.
type Mailbox struct {
	store    store.Store
	queue    string
	workerID string
	poll     time.Duration
	clk      clock.Clock
}

// New returns a mailbox for cfg.Queue.
func New(cfg Config) *Mailbox {
	return &Mailbox{store: cfg.Store, queue: cfg.Queue, workerID: cfg.WorkerID, poll: cfg.PollInterval, clk: cfg.Clock}
}

// NewWorkerID returns an id that is unique per process and call: host name,
// process id and a random suffix.
func NewWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// ReceiveOptions shape one Receive.
type ReceiveOptions struct {
	// Max is how many messages to take at most: 1 to store.MaxBatch.
	Max int
	// Visibility is the lease: how long the messages stay invisible to
	// other receivers unless extended.
	Visibility time.Duration
	// Wait is how long to wait for a first message. Zero returns at once.
	Wait time.Duration
	// Stop, when closed, ends the wait at once with no messages, as a
	// passed Wait does. Unlike ctx, it never cuts a claim short, so a
	// claim that took messages always returns them.
	Stop <-chan struct{}
	// Wake, when closed, ends the wait at once with no messages, as Stop
	// does: for a receiver that has other work to see to.
	Wake <-chan struct{}
	// Runs claims each keyed message with the next messages of its key
	// (see store.Claim's Runs).
	Runs bool
	// Independent, with Runs, gives each message of a run a lease of its
	// own (see store.Claim's Independent).
	Independent bool
}

// Receive claims up to o.Max messages. With a positive o.Wait it long-polls:
// it returns as soon as a claim gets messages, waking at once on an enqueue
// in this process and otherwise looking again every PollInterval, and
// returns no messages (and no error) when o.Wait passes.
func (m *Mailbox) Receive(ctx context.Context, o ReceiveOptions) ([]*Message, error) {
	c := store.Claim{Queue: m.queue, WorkerID: m.workerID, Max: o.Max, LeaseDuration: o.Visibility, Runs: o.Runs,
		Independent: o.Independent}
	deadline := m.clk.Monotonic() + o.Wait
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		wake := m.store.Wakeup(m.queue)
		sent := m.clk.Monotonic()
		ds, err := m.store.Claim(ctx, c)
		if err != nil || len(ds) > 0 {
			return wrap(ds, sent+o.Visibility), err
		}
		left := deadline - m.clk.Monotonic()
		if left <= 0 {
			return nil, nil
		}
		d := min(left, m.poll)
		if timer == nil {
			timer = m.clk.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-wake:
		case <-timer.C():
		case <-o.Stop:
			return nil, nil
		case <-o.Wake:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func wrap(ds []store.Delivery, deadline time.Duration) []*Message {
	if len(ds) == 0 {
		return nil
	}
	ms := make([]Message, len(ds))
	out := make([]*Message, len(ds))
	for i := range ds {
		ms[i] = Message{Delivery: &ds[i], deadline: deadline}
		out[i] = &ms[i]
	}
	return out
}

// Message is a received message. Its lease is current until it expires,
// another receiver claims the message after that, or the store completes,
// fails or releases it.
type Message struct {
	// Delivery is one of the claim's deliveries, which share one array:
	// a message held keeps every delivery of its claim reachable, so a
	// receiver that holds messages long copies theirs. Never changed.
	*store.Delivery
	deadline time.Duration
}

// LeaseDeadline returns when the lease ends by the receiver's own reckoning,
// on the mailbox clock's monotonic time: the moment the claim was sent
// plus the visibility it asked for. As long as both clocks run at the same
// rate, the store's expiry is not earlier, whatever the offset between the
// store's clock and the receiver's, so work stopped by this deadline never
// outlives its lease.
func (msg *Message) LeaseDeadline() time.Duration { return msg.deadline }
