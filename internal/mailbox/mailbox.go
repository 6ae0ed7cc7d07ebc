// Package mailbox is the SQS-like view of a queue that handlers and loops
// use: Send; Receive with a visibility timeout and long polling; and, on a
// received message, Ack, Nack, Fail and ExtendVisibility, all fenced by the
// message's lease.
package mailbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// Mailbox sends to and receives from one queue. It is safe for concurrent
// use.
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

// Queue returns the mailbox's queue name.
func (m *Mailbox) Queue() string { return m.queue }

// WorkerID returns the id the mailbox claims under.
func (m *Mailbox) WorkerID() string { return m.workerID }

// Clock returns the clock the mailbox times receives and lease deadlines
// on.
func (m *Mailbox) Clock() clock.Clock { return m.clk }

// Store returns the mailbox's store.
func (m *Mailbox) Store() store.Store { return m.store }

// SendOptions are a message's optional settings.
type SendOptions struct {
	// Key orders messages: one message of a key runs at a time, in order.
	Key string
	// DedupID makes a second send with the same id within the store's dedup
	// window a no-op that returns the first message's id.
	DedupID string
	// Delay keeps the message invisible for this long.
	Delay time.Duration
	// MaxDeliveries is the delivery budget; zero means the default of 5.
	MaxDeliveries int
	// ReplyTo names the queue replies go to.
	ReplyTo string
}

func (m *Mailbox) newMessage(body []byte, o SendOptions) store.NewMessage {
	return store.NewMessage{Queue: m.queue, Payload: body, Key: o.Key, DedupID: o.DedupID, Delay: o.Delay, MaxDeliveries: o.MaxDeliveries, ReplyTo: o.ReplyTo}
}

// Send enqueues one message.
func (m *Mailbox) Send(ctx context.Context, body []byte, o SendOptions) (store.Enqueued, error) {
	res, err := m.store.Enqueue(ctx, []store.NewMessage{m.newMessage(body, o)})
	if err != nil {
		return store.Enqueued{}, err
	}
	return res[0], nil
}

// SendBatch enqueues many messages with the same options, all or none.
func (m *Mailbox) SendBatch(ctx context.Context, bodies [][]byte, o SendOptions) ([]store.Enqueued, error) {
	msgs := make([]store.NewMessage, len(bodies))
	for i, b := range bodies {
		msgs[i] = m.newMessage(b, o)
	}
	return m.store.Enqueue(ctx, msgs)
}

// ReceiveOptions shape one Receive.
type ReceiveOptions struct {
	// Max is how many messages to take at most. Default 1.
	Max int
	// Visibility is the lease: how long the messages stay invisible to
	// other receivers unless extended. Required.
	Visibility time.Duration
	// Wait is how long to wait for a first message. Zero returns at once.
	Wait time.Duration
	// Stop, when closed, ends the wait at once with no messages, as a
	// passed Wait does. Unlike ctx, it never cuts a claim short, so a
	// claim that took messages always returns them.
	Stop <-chan struct{}
}

// Receive claims up to o.Max messages. With a positive o.Wait it long-polls:
// it returns as soon as a claim gets messages, waking at once on an enqueue
// in this process and otherwise looking again every PollInterval, and
// returns no messages (and no error) when o.Wait passes.
func (m *Mailbox) Receive(ctx context.Context, o ReceiveOptions) ([]*Message, error) {
	if o.Max == 0 {
		o.Max = 1
	}
	if o.Wait < 0 {
		return nil, fmt.Errorf("mailbox: %w: wait is %s, must not be negative", store.ErrInvalid, o.Wait)
	}
	c := store.Claim{Queue: m.queue, WorkerID: m.workerID, Max: o.Max, LeaseDuration: o.Visibility}
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
			return m.wrap(ds, sent+o.Visibility), err
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
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (m *Mailbox) wrap(ds []store.Delivery, deadline time.Duration) []*Message {
	if len(ds) == 0 {
		return nil
	}
	out := make([]*Message, len(ds))
	for i := range ds {
		out[i] = &Message{Delivery: ds[i], mb: m, deadline: deadline}
	}
	return out
}

// Message is a received message. Its lease is current until it expires,
// another receiver reclaims the message after that, or this receiver acks,
// nacks or fails it.
type Message struct {
	store.Delivery
	mb       *Mailbox
	deadline time.Duration
}

// LeaseDeadline returns when the lease ends by the receiver's own reckoning,
// on the mailbox clock's monotonic time: the moment the claim (or the last
// successful ExtendVisibility) was sent plus the visibility it asked for.
// As long as both clocks run at the same rate, the store's expiry is not
// earlier, whatever the offset between the store's clock and the
// receiver's, so work stopped by this deadline never outlives its lease.
func (msg *Message) LeaseDeadline() time.Duration { return msg.deadline }

// Mailbox returns the mailbox the message was received from.
func (msg *Message) Mailbox() *Mailbox { return msg.mb }

// Body returns the payload. It must not be modified.
func (msg *Message) Body() []byte { return msg.Payload }

// ReceiptHandle returns an opaque string naming this delivery's lease; see
// ParseReceiptHandle.
func (msg *Message) ReceiptHandle() string { return FormatReceiptHandle(msg.Lease) }

// Ack completes the message.
func (msg *Message) Ack(ctx context.Context) error {
	return msg.complete(ctx, nil)
}

// AckWithReply completes the message and sends body to its ReplyTo queue in
// the same transaction.
func (msg *Message) AckWithReply(ctx context.Context, body []byte) error {
	if msg.ReplyTo == "" {
		return fmt.Errorf("mailbox: %w: message %d has no reply-to queue", store.ErrInvalid, msg.MessageID)
	}
	return msg.complete(ctx, &store.NewMessage{Queue: msg.ReplyTo, Payload: body})
}

func (msg *Message) complete(ctx context.Context, reply *store.NewMessage) error {
	errs, err := msg.mb.store.Complete(ctx, []store.Completion{{Lease: msg.Lease, Reply: reply}})
	if err != nil {
		return err
	}
	return errs[0]
}

// Nack gives the message back, visible again after delay. The delivery
// still counts.
func (msg *Message) Nack(ctx context.Context, delay time.Duration) error {
	return msg.mb.store.Release(ctx, store.Release{Lease: msg.Lease, Delay: delay})
}

// Unreceive gives the message back at once and takes back the delivery its
// receive counted: for messages received but never started, as when a
// worker shuts down.
func (msg *Message) Unreceive(ctx context.Context) error {
	return msg.mb.store.Release(ctx, store.Release{Lease: msg.Lease, Uncount: true})
}

// Fail records a failed attempt: the message is retried after retryDelay,
// or dead-lettered when permanent is set or its deliveries are used up. It
// reports whether the message is now dead.
func (msg *Message) Fail(ctx context.Context, cause error, retryDelay time.Duration, permanent bool) (bool, error) {
	text := ""
	if cause != nil {
		text = cause.Error()
	}
	return msg.mb.store.Fail(ctx, store.Failure{Lease: msg.Lease, Error: text, RetryDelay: retryDelay, Permanent: permanent})
}

// ExtendVisibility keeps the message invisible for d from now. It returns
// an error wrapping store.ErrLeaseLost when the lease is no longer current.
func (msg *Message) ExtendVisibility(ctx context.Context, d time.Duration) error {
	sent := msg.mb.clk.Monotonic()
	res, err := msg.mb.store.Extend(ctx, []store.Lease{msg.Lease}, d)
	if err != nil {
		return err
	}
	if len(res.Lost) > 0 {
		return store.LeaseLost(msg.Lease)
	}
	msg.LeaseExpires = res.Expires
	msg.deadline = sent + d
	return nil
}

// FormatReceiptHandle encodes a lease as a receipt handle.
func FormatReceiptHandle(l store.Lease) string {
	return strconv.FormatInt(l.MessageID, 36) + "." + strconv.FormatInt(l.FencingToken, 36)
}

// ParseReceiptHandle decodes a receipt handle made by FormatReceiptHandle.
func ParseReceiptHandle(h string) (store.Lease, error) {
	id, fence, ok := strings.Cut(h, ".")
	if ok {
		i, err1 := strconv.ParseInt(id, 36, 64)
		f, err2 := strconv.ParseInt(fence, 36, 64)
		if err1 == nil && err2 == nil && i > 0 && f > 0 {
			return store.Lease{MessageID: i, FencingToken: f}, nil
		}
	}
	return store.Lease{}, fmt.Errorf("mailbox: %w: malformed receipt handle %q", store.ErrInvalid, h)
}
