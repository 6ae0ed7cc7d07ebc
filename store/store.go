package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors that callers branch on.
var (
	// ErrLeaseLost reports that a lease is no longer current: the message was
	// reclaimed, finished, released or reaped, or the lease expired.
	ErrLeaseLost = errors.New("lease lost")
	// ErrInvalid reports bad input; the operation changed nothing.
	ErrInvalid = errors.New("invalid argument")
	// ErrNotFound reports that a message, or a queue's record (see
	// Store.CreateQueue), does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSchemaTooNew reports a database written by a newer leasehold.
	ErrSchemaTooNew = errors.New("database schema is newer than this leasehold")
	// ErrNotMigrated: the database holds no leasehold schema, or an older
	// one, and the store was opened without the right to create it.
	ErrNotMigrated = errors.New("not a leasehold database; run leasehold migrate")
	// ErrClosed reports use of a closed store.
	ErrClosed = errors.New("store closed")
	// ErrProcessing reports an operation that a processing message
	// refuses (see Store.Rerun and Store.Delete); it changed nothing.
	ErrProcessing = errors.New("message is processing")
)

// State is where a message is in its life.
type State int

// The states of a message.
const (
	// Pending messages are claimable once visible.
	Pending State = iota
	// Waiting messages are queued behind an unfinished message of their key.
	Waiting
	// Processing messages are held under a lease.
	Processing
	// Completed messages were acknowledged; they are kept for the dedup window
	// and the retention period.
	Completed
	// Dead messages failed for good; they are kept until purged or
	// redriven. A message with a dead-letter queue never stays dead: it
	// moves there (see NewMessage.DeadLetterQueue).
	Dead
	// Cancelled messages were cancelled before they finished (see
	// Store.Cancel); they never run again.
	Cancelled
)

// States is the number of states: each is below it.
const States = int(Cancelled) + 1

// DefaultUniqueStates are the states in which a message makes another of
// its unique key a duplicate, unless NewMessage.UniqueStates says
// otherwise: every state but dead and cancelled, so that a message that
// ran is not enqueued again, and one that failed for good or was
// cancelled does not stop its key.
var DefaultUniqueStates = []State{Pending, Waiting, Processing, Completed}

var stateNames = [States]string{"pending", "waiting", "processing", "completed", "dead", "cancelled"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// ParseState parses the name of a state.
func ParseState(name string) (State, error) {
	for i, n := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown state %q (want pending, waiting, processing, completed, dead or cancelled)", ErrInvalid, name)
}

// DeadReason says why a message was dead-lettered.
type DeadReason string

// The reasons for dead-lettering.
const (
	// ReasonMaxDeliveries: the handler failed on the last allowed delivery.
	ReasonMaxDeliveries DeadReason = "max_deliveries"
	// ReasonLeaseExpired: the lease of the last allowed delivery expired.
	ReasonLeaseExpired DeadReason = "lease_expired"
	// ReasonPermanent: the handler reported a permanent error.
	ReasonPermanent DeadReason = "permanent_error"
	// ReasonMaxProcessingTime: the handler ran past its time on the last
	// allowed delivery.
	ReasonMaxProcessingTime DeadReason = "max_processing_time"
)

// Lease names one claim of one message.
type Lease struct {
	MessageID    int64
	FencingToken int64
}

func (l Lease) String() string {
	return fmt.Sprintf("message %d lease %d", l.MessageID, l.FencingToken)
}

// LeaseLost returns the error for an operation on a lease that is not
// current: it wraps ErrLeaseLost and names the lease.
func LeaseLost(l Lease) error { return fmt.Errorf("%s: %w", l, ErrLeaseLost) }

// NoRecordError is the error for a queue that has no record (see
// Store.CreateQueue) where one is needed: QueueInfo's, and Move's for a
// queue it would move messages to. It wraps ErrNotFound.
type NoRecordError struct{ Queue string }

func (e *NoRecordError) Error() string {
	return fmt.Sprintf("%v: queue %q has no record (it was never created, or was deleted)", ErrNotFound, e.Queue)
}

func (e *NoRecordError) Unwrap() error { return ErrNotFound }

// BatchError reports the message of a batch that Enqueue refused, by its
// index in the batch: the batch enqueued nothing. It wraps the reason,
// which wraps ErrInvalid. A batch of one message is refused with the
// reason alone.
type BatchError struct {
	// Index is the refused message's index in the batch, from 0.
	Index int
	// Len is the number of messages in the batch.
	Len int
	// Err is why the message was refused.
	Err error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("message %d of %d: %v", e.Index+1, e.Len, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

// NewMessage is a message to enqueue.
type NewMessage struct {
	// Queue is required: 1 to MaxNameLength bytes.
	Queue string
	// Payload and Attributes together are at most the store's payload
	// limit (1 MiB by default).
	Payload []byte
	// Attributes are metadata kept beside the payload, opaque to the
	// store: Claim and List return them as they were given. Nil or empty
	// means none, and comes back nil. Their bytes count toward the
	// payload limit.
	Attributes []byte
	// Key orders messages: among messages of one queue with the same
	// non-empty key, one runs at a time, in enqueue order. Empty: unordered.
	Key string
	// FairGroup, on a message without a Key, names the tenant it is sent
	// for, so that one tenant's backlog cannot starve the others: the
	// messages of a group still run concurrently, in no set order, but
	// each takes its place in the claim order right behind its group's
	// last message that is ready and unclaimed, or behind the queue's
	// first ready message when the group has none, and never later than
	// the moment it is enqueued. So a group whose messages wait in a
	// backlog gets one turn among the others' new messages rather than
	// holding them up, and two backlogged groups take turns. The queue's
	// first ready message is the first of the message's priority; the
	// group's last is of any priority (a group sends at one priority, as
	// the SQS API does). Placement applies to messages ready at once (a
	// delayed one is placed at its time, as others are) and lasts until
	// the message's first claim. Empty: placed at its
	// time, as others are. Placement is to the microsecond: messages
	// placed at one instant (one transaction's batch) go in enqueue
	// order. At most MaxNameLength bytes of UTF-8 without NUL, and only
	// without a Key, which orders its messages itself.
	FairGroup string
	// UniqueKey, when set, makes the message unique: while a message with
	// the same UniqueKey, in any queue, is in one of UniqueStates, the
	// enqueue adds nothing and returns that message's id as a duplicate.
	// Two enqueues of one key at once, from any processes, give one
	// message. The key is the caller's to make (of the queue, the kind,
	// the arguments, a period, as it wants); the check is made at enqueue
	// only, so a message that later returns to one of the states (a
	// redrive, a retry) may stand beside another of its key. At most
	// MaxNameLength bytes of UTF-8 without NUL. A completed or dead
	// message counts until it is pruned.
	UniqueKey string
	// UniqueStates are the states in which a message of the same
	// UniqueKey makes this one a duplicate. Empty: DefaultUniqueStates.
	// Only with a UniqueKey.
	UniqueStates []State
	// DedupID, when set, makes a second message with the same id in the same
	// queue within the dedup window a duplicate: it is not enqueued and the
	// existing message's id is returned.
	DedupID string
	// Delay keeps the message invisible for this long. Must not be negative.
	Delay time.Duration
	// MaxDeliveries is how many claims the message gets before it is
	// dead-lettered. Zero means DefaultMaxDeliveries.
	MaxDeliveries int
	// ReplyTo names the queue a reply goes to. Optional.
	ReplyTo string
	// Kind names what the message asks for, so that one queue can carry
	// several kinds of job and a client can dispatch by it. Optional: at
	// most MaxNameLength bytes of UTF-8 without NUL.
	Kind string
	// Priority orders the claims of a queue: higher runs first, then
	// earlier visible, then older. MinPriority to MaxPriority; default 0.
	// A key's messages still run one at a time in enqueue order, whatever
	// their priorities.
	Priority int
	// DeadLetterQueue, when set, names the queue the message moves to
	// when it is dead-lettered (a failure on its last delivery or a
	// permanent one, or the lease of its last delivery expired), in the
	// same transaction, instead of staying dead in its own queue. There
	// it arrives as a new message would (see Move): pending, or waiting
	// behind an unfinished message of its key; with its payload,
	// attributes, key, kind, priority and enqueue time; without its dedup
	// id; with its delivery count and first claim kept (its next claim
	// there is counted after those it had, as Amazon SQS counts a dead
	// letter's receives), the budget MaxDeliveriesLimit and no
	// dead-letter queue of its own, the target queue's limits being
	// its user's to apply (the SQS API applies them at receive). Its dead
	// reason and last error are recorded, and the queue it left is its
	// DeadLetterSource. Empty: dead in its own queue. It must name
	// another queue. The queue must have a record (see CreateQueue) when
	// the message dies: one deleted since (or never created) takes
	// nothing, and the message dies in its own queue, its last error
	// naming the missing queue, so that a deleted queue never comes back
	// with messages in it.
	DeadLetterQueue string
}

// TxStore is a store that can enqueue inside its caller's transaction, of
// type TTx: the transactional outbox. The messages become visible when the
// transaction commits and vanish if it rolls back.
type TxStore[TTx any] interface {
	Store
	EnqueueTx(ctx context.Context, tx TTx, msgs []NewMessage) ([]Enqueued, error)
}

// TxLister is a store that can list messages inside its caller's
// transaction, of type TTx, seeing what the transaction enqueued before it
// commits: how a test checks an outbox.
type TxLister[TTx any] interface {
	ListTx(ctx context.Context, tx TTx, f ListFilter) ([]Info, error)
}

// WithoutTx returns st as a TxStore whose EnqueueTx takes no transaction
// and enqueues at once, for a program that never enqueues inside its own
// transactions.
func WithoutTx(st Store) TxStore[NoTx] { return withoutTx{st} }

type withoutTx struct{ Store }

func (s withoutTx) EnqueueTx(ctx context.Context, _ NoTx, msgs []NewMessage) ([]Enqueued, error) {
	return s.Enqueue(ctx, msgs)
}

// NoTx is the transaction type of a store without transactions of its
// own: its EnqueueTx enqueues at once.
type NoTx struct{}

// Enqueued is the outcome of enqueueing one message.
type Enqueued struct {
	ID int64
	// Duplicate is true when a message with the same dedup id was enqueued
	// within the dedup window; ID is then that message's id.
	Duplicate bool
}

// Claim asks for messages.
type Claim struct {
	Queue    string
	WorkerID string
	// Max is how many messages to claim at most: 1 to MaxBatch.
	Max int
	// LeaseDuration is how long the lease lasts: at least MinLease.
	LeaseDuration time.Duration
	// Runs makes each keyed message the claim takes bring the next
	// messages of its key along, in enqueue order, in the same step: up
	// to Max messages in all, each with its own lease of this claim and
	// its delivery counted, as Amazon SQS FIFO queues give a receive
	// several messages of one group. A run stops at the first of the
	// key's messages that is not visible yet, and at the first that is
	// processing (see Independent). The results hold each key's messages
	// together, in order. The key stays busy while any of its messages is
	// processing: its next message goes only once none is pending or
	// processing (unless the processing ones were claimed Independent). Completing a run's messages out of order is
	// allowed. When a message of a run goes back to the queue (a failure
	// that will be retried, a release, a reap of its expired lease), the
	// later messages of its key that are still processing go back with
	// it, uncounted, so that a message that keeps failing does not use up
	// the budgets of those behind it: their leases are lost, the key's
	// first unfinished message becomes its head again and the rest wait
	// behind it. A message of a run that is dead-lettered or cancelled
	// lets the rest run on. False: a key's messages are claimed one at a
	// time.
	Runs bool
	// Independent, with Runs, gives each message of a run a lease that
	// stands on its own, as Amazon SQS FIFO queues keep a visibility
	// timeout per message: the message is claimed so (each message keeps
	// how it was claimed until its next claim), and when it goes back to
	// the queue (a failure that will be retried, a release, a reap of its
	// expired lease) the later messages of its key stay processing under
	// their leases, and it alone goes back, its delivery counted as
	// usual, each message of a reap judged on its own (dead on its last
	// delivery). A message that goes back becomes its key's head again,
	// claimable at once, unless a message of its key before it is still
	// processing or the key has a pending head already: then it waits,
	// behind it. In every claim with runs, a run stops at the first
	// message of its key that is processing, so that no claim gives out
	// a message behind one that is processing. A key's first waiting
	// message goes (when the message before it finishes) once the key
	// has no pending message and each of its processing ones was claimed
	// Independent and comes after it. A message claimed without it that
	// goes back still brings back the later ones claimed without it.
	// Only with Runs.
	Independent bool
}

// Delivery is a claimed message and its lease.
type Delivery struct {
	Lease
	Queue   string
	Key     string
	Payload []byte
	ReplyTo string
	DedupID string
	Kind    string
	// Priority is the message's priority (see NewMessage).
	Priority int
	// Attempt counts claims of this message, this one included.
	Attempt       int
	MaxDeliveries int
	EnqueuedAt    time.Time
	LeaseExpires  time.Time
	// Attributes are the message's attributes (see NewMessage); nil when
	// it has none.
	Attributes []byte
	// FirstClaimedAt is when the message's first claim took it: this
	// claim's time on the first attempt, and kept through later claims,
	// releases, reaps, redrives and a dead letter's move to its
	// dead-letter queue (Store.Move starts it again).
	FirstClaimedAt time.Time
	// DeadLetterSource is the queue the message was dead-lettered from
	// (see Info); empty for none.
	DeadLetterSource string
}

// Completion finishes a claimed message.
type Completion struct {
	Lease
	// Reply, when not nil, is enqueued in the same transaction as the
	// completion, and only if the completion succeeds.
	Reply *NewMessage
	// Late fences the completion by the token alone, not by the lease's
	// expiry: the lease completes its message as long as no claim has
	// taken the message since, whether the lease has expired or not.
	// That is, the message is processing under the lease's token, or
	// pending under it because the reaper, a release or a retry gave it
	// back (not waiting behind its key). A late completion of a message
	// already completed under the same token succeeds and changes nothing
	// (its reply is not sent again), so that a retried completion whose
	// answer was lost is harmless. A dead or cancelled message is never
	// completed, late or not, nor one moved to another queue or redriven
	// since the lease (Store.Move, Store.Redrive, a dead-letter queue):
	// that clears its token. False: the lease must be current, as for
	// every other operation on a lease; Amazon SQS standard queues fence
	// a receipt handle as Late does.
	Late bool
}

// Failure reports that handling a claimed message failed.
type Failure struct {
	Lease
	// Error is recorded on the message. Long texts are cut to MaxErrorLength.
	Error string
	// Reply, when not nil, is enqueued in the same transaction when the
	// failure dead-letters the message, and only then: a request that
	// failed for good is answered with its error.
	Reply *NewMessage
	// RetryDelay is how long the message stays invisible before its next
	// delivery. Must not be negative.
	RetryDelay time.Duration
	// Permanent dead-letters the message at once.
	Permanent bool
	// Reason is recorded when the failure dead-letters the message; empty
	// means ReasonPermanent for a permanent failure, else ReasonMaxDeliveries.
	Reason DeadReason
	// DeadLetterQueue, when set and the failure dead-letters the message,
	// moves the message there as NewMessage.DeadLetterQueue says, in
	// place of the message's own dead-letter queue, if any. A queue that
	// is the message's own leaves it dead there.
	DeadLetterQueue string
	// Uncount takes back the delivery the lease's claim counted, for a
	// message its claimer never handled: the SQS API dead-letters so a
	// message it finds past its redrive policy's count at receive, which
	// Amazon SQS does without counting that receive.
	Uncount bool
}

// ReleasedError is recorded on a message given back by a counted Release.
const ReleasedError = "released unfinished"

// Release gives a claimed message back unfinished. A counted release uses
// up the delivery like a failed attempt: on the message's last delivery it
// dead-letters the message (ReasonMaxDeliveries), so that no message is
// delivered more often than its budget allows.
type Release struct {
	Lease
	// Delay keeps it invisible for this long. Must not be negative.
	Delay time.Duration
	// Uncount takes back the delivery its claim counted, for messages that
	// were received but never started (a shutdown).
	Uncount bool
	// Snooze counts the release as a snooze of the message (Info.Snoozes):
	// its handler asked for it to run again later. It needs Uncount.
	Snooze bool
	// Late fences the release by the token alone, as Completion's Late
	// does: it goes through while no claim has taken the message since,
	// whether the lease has expired or not (the message is processing
	// under the token, or pending under it). A late release makes the
	// message pending, visible after Delay, and never dead-letters it: its
	// delivery stays counted, unless Uncount, as a reaped one's does. An
	// Amazon SQS standard queue changes a message's visibility so, under
	// a receipt handle whose visibility timeout has ended.
	Late bool
}

// Extended is the outcome of a batch extension.
type Extended struct {
	// Lost lists the leases that could not be extended: they are lost.
	Lost []Lease
	// Expires is the new expiry of the extended leases; the earliest one
	// when the backend renewed them in several transactions.
	Expires time.Time
	// Cancelled lists the lost leases whose message was cancelled while
	// they held it (see Store.Cancel): a subset of Lost.
	Cancelled []Lease
}

// Recovered is one message the reaper took back.
type Recovered struct {
	ID    int64
	Queue string
	// Dead is true when its deliveries were used up and it was dead-lettered.
	Dead bool
	// MovedTo names the queue a dead-lettered message moved to (its
	// NewMessage.DeadLetterQueue); empty when it stays dead in Queue.
	MovedTo string
	// StuckFor is how long its lease had been expired.
	StuckFor time.Duration
}

// DeadLetter is a message that failed for good.
type DeadLetter struct {
	ID         int64
	Queue      string
	Key        string
	Payload    []byte
	Deliveries int
	Reason     DeadReason
	LastError  string
	DeadAt     time.Time
	EnqueuedAt time.Time
}

// Stats counts a queue's messages.
type Stats struct {
	Queue      string
	Pending    int64
	Waiting    int64
	Processing int64
	Completed  int64
	Dead       int64
	// BlockedKeys counts keys that have messages waiting behind their head.
	BlockedKeys int64
	// OldestPendingAge is the age of the oldest pending message, measured
	// from when it became visible; zero when none is pending.
	OldestPendingAge time.Duration
	// Cancelled counts the cancelled messages.
	Cancelled int64
	// Paused says whether the queue is paused (see Store.Pause).
	Paused bool
	// Delayed counts the pending messages that are not visible yet (a
	// delay, a retry delay or a release's delay): a part of Pending.
	Delayed int64
}

// Info describes a message for listings.
type Info struct {
	ID            int64
	Queue         string
	Key           string
	DedupID       string
	Kind          string
	Priority      int
	State         State
	Payload       []byte
	Deliveries    int
	MaxDeliveries int
	FencingToken  int64
	WorkerID      string
	LastError     string
	DeadReason    DeadReason
	EnqueuedAt    time.Time
	VisibleAt     time.Time
	LeaseExpires  time.Time // zero unless processing
	FinishedAt    time.Time // zero unless completed, dead or cancelled
	// Attributes are the message's attributes (see NewMessage); nil when
	// it has none.
	Attributes []byte
	// FirstClaimedAt is when the message's first claim took it; zero
	// while it was never claimed.
	FirstClaimedAt time.Time
	// DeadLetterQueue is where the message moves when it is
	// dead-lettered (see NewMessage); empty for none.
	DeadLetterQueue string
	// DeadLetterSource is the queue the message was dead-lettered from
	// into this one (see NewMessage.DeadLetterQueue); empty when it was
	// not, or when Move moved it on since.
	DeadLetterSource string
	// Errors is the message's error history, oldest first: an entry for
	// each error recorded as its last (a failure, a counted release, an
	// expired lease, a dead-lettering), the newest MaxErrors of them,
	// kept through redrives and moves. Get fills it; List leaves it nil,
	// as a page of messages has no use for every error of each.
	Errors []AttemptError
	// Snoozes counts the message's releases with Release.Snooze. Get
	// fills it; List leaves it zero.
	Snoozes int
}

// AttemptError is an error of one attempt of a message.
type AttemptError struct {
	// Attempt is the delivery the error ended: the message's deliveries
	// counted when it was recorded.
	Attempt int `json:"attempt"`
	// At is when it was recorded.
	At time.Time `json:"at"`
	// WorkerID is the worker whose lease the attempt was; empty when no
	// claim ever took the message.
	WorkerID string `json:"worker,omitempty"`
	// Error is the error's text.
	Error string `json:"error"`
}

// QueueInfo is a queue's record, kept in the database: made by CreateQueue.
type QueueInfo struct {
	Queue string
	// Paused says whether claims from the queue are paused (see Store.Pause).
	Paused bool
	// Attributes are settings kept for the queue's users; the store does not
	// read them (the SQS API keeps a queue's SQS attributes here). Never nil
	// in results.
	Attributes map[string]string
	// CreatedAt is when CreateQueue made the record; UpdatedAt when its
	// attributes last changed (CreatedAt until then).
	CreatedAt, UpdatedAt time.Time
}

// Maintainer is the holder of a database's maintainer lease.
type Maintainer struct {
	// Holder names the process that holds or last held the lease; empty
	// when none ever did.
	Holder string
	// Token fences the lease: it grows each time the lease changes hands
	// or is taken again after it lapsed.
	Token int64
	// Expires is when the lease lapses unless renewed.
	Expires time.Time
}

// Prune selects finished messages for Store.Prune.
type Prune struct {
	// Queue limits the pruning to one queue. Empty: every queue.
	Queue string
	// State is Completed, Dead or Cancelled.
	State State
	// OlderThan keeps messages that finished less than this long ago. Not
	// negative.
	OlderThan time.Duration
	// Limit is how many to delete at most: 1 to MaxBatch.
	Limit int
}

// Move selects messages for Store.Move and says what they become.
type Move struct {
	// Queue is the queue the messages leave.
	Queue string
	// State is Pending (the visible ones, in claim order) or Dead (by id).
	State State
	// To names the queue they go to, another than Queue. Empty: each goes
	// back to its DeadLetterSource, and messages without one are passed
	// over.
	To string
	// Limit is how many to move at most: 1 to MaxBatch.
	Limit int
	// MaxDeliveries is the moved messages' delivery budget: 1 to
	// MaxDeliveriesLimit, zero for DefaultMaxDeliveries.
	MaxDeliveries int
	// DeadLetterQueue becomes the moved messages' dead-letter queue (see
	// NewMessage); empty for none.
	DeadLetterQueue string
}

// ListFilter selects messages for List: those of Queue in State that
// pass every filter that is set.
type ListFilter struct {
	Queue string
	State State
	// Key, when set, lists only the messages with this key.
	Key string
	// Kind, when set, lists only the messages of this kind.
	Kind string
	// Reason, when set, lists only the messages dead for this reason. It
	// needs State Dead: with any other state it is ErrInvalid.
	Reason DeadReason
	// AfterID lists messages with larger ids only, for paging.
	AfterID int64
	// BeforeID, when positive, lists messages with smaller ids only, and
	// the result is then in descending id order, newest first: the page
	// before the one that starts at BeforeID. Not negative. It may be
	// combined with AfterID, to list the ids between them.
	BeforeID int64
	// Limit is 1 to MaxBatch; zero means 100.
	Limit int
}

// ThroughputWindow is how far back Store.Throughput reaches: the counts
// of each minute are kept at least this long, and the cleaner's
// PruneThroughput deletes them some time after.
const ThroughputWindow = 24 * time.Hour

// Minute is what a queue's messages did in one minute: its settlements
// counted by the store as they commit (see Store.Throughput).
type Minute struct {
	// At is the minute's start, in UTC.
	At time.Time
	// Completed counts the completions; Failed the failed deliveries
	// that will be retried (a failure, a counted release, an expired
	// lease); Dead the messages dead-lettered (a last failure, a
	// permanent one, an expired last lease), counted in the queue they
	// died in, whether they stayed there or moved to a dead-letter
	// queue.
	Completed, Failed, Dead int64
}

// ScheduledAfter is where a page of Store.Scheduled starts: after the
// message of ID that becomes visible at VisibleAt. The zero value starts
// at the first.
type ScheduledAfter struct {
	VisibleAt time.Time
	ID        int64
}

// BlockedKey is a key whose messages wait behind its head.
type BlockedKey struct {
	Key string
	// Waiting counts the key's messages behind its head.
	Waiting int64
	// Head is the key's message that runs (or will run) first: pending or
	// processing. It is the zero Info, with ID 0, when the key had
	// waiting messages but no head at the instant it was read (a race
	// with the promotion of its next message).
	Head Info
}

// Store is a durable queue of messages under fenced leases. Implementations
// are safe for concurrent use. Operations on many messages run in one
// statement or transaction, except Extend. Every operation that returns an
// error other than a per-message result changed nothing, except Extend.
type Store interface {
	// Enqueue adds messages, all or none. The results are in input order.
	// A batch of several with a message that is bad input is refused with
	// a *BatchError naming it.
	Enqueue(ctx context.Context, msgs []NewMessage) ([]Enqueued, error)
	// Claim leases up to c.Max visible pending messages of a queue, the
	// highest priority first and, within one priority, the oldest visible
	// first (then the oldest), counting a delivery for each and minting a
	// new lease.
	// It never blocks waiting for messages; see Wakeup. A backend may pass
	// over a message that another operation holds locked at that moment
	// (PostgreSQL's SKIP LOCKED); a later claim gets it.
	Claim(ctx context.Context, c Claim) ([]Delivery, error)
	// Extend sets the expiry of every given lease that is still current to
	// now+extension. The result lists the leases that are lost, and the
	// earliest new expiry. A backend may renew the leases in several
	// transactions, so that each holds its rows for less time: an error
	// may then come after some leases were renewed. Renewing a current
	// lease early does no harm, and a retry is safe.
	Extend(ctx context.Context, leases []Lease, extension time.Duration) (Extended, error)
	// Complete finishes messages, each fenced on its own. The result holds
	// one entry per completion: nil, or an error wrapping ErrLeaseLost.
	Complete(ctx context.Context, cs []Completion) ([]error, error)
	// Fail records a failed delivery: the message is retried after the
	// delay, or dead-lettered when it is permanent or its deliveries are
	// used up. It reports whether the message is now dead.
	Fail(ctx context.Context, f Failure) (dead bool, err error)
	// Release gives a message back unfinished.
	Release(ctx context.Context, r Release) error
	// Reap returns messages whose lease has expired to pending, or
	// dead-letters them when their deliveries are used up. It is idempotent
	// and safe to run in many processes at once.
	Reap(ctx context.Context) ([]Recovered, error)
	// Redrive returns dead messages to pending with a fresh delivery
	// budget: the given ids, or all of the queue's when ids is empty. It
	// returns how many it moved. No lease from before a message died
	// reaches it, not even a late completion: its next claim mints its
	// next fencing token.
	Redrive(ctx context.Context, queue string, ids []int64) (int, error)
	// Move moves up to m.Limit messages of a queue in one state to another
	// queue, in one transaction, and returns how many it moved. Each
	// arrives as a new message would: pending and visible at once, or
	// waiting in its new queue behind every message of its key there
	// (though its id, which it keeps, is older than theirs);
	// with a fresh delivery count and m's budget and dead-letter queue;
	// without its dedup id or dead reason; keeping its id, payload,
	// attributes, key, kind, priority, enqueue time and last error. It
	// is no longer a dead letter: its DeadLetterSource is cleared. A
	// moved pending message that headed its key's line lets the next one
	// of the line go. No lease from before the move reaches a moved
	// message, not even a late completion (see Completion.Late): its next
	// claim mints its next fencing token. A backend
	// may pass over a message another operation holds locked (as Claim
	// does). Every queue the batch would go to must have a record (see
	// CreateQueue): else nothing moves, and the error is a
	// *NoRecordError naming one that has none.
	Move(ctx context.Context, m Move) (int, error)
	// Purge deletes dead messages: the given ids, or all of the queue's when
	// ids is empty. It returns how many it deleted.
	Purge(ctx context.Context, queue string, ids []int64) (int, error)
	// Rerun makes messages, by id, of any queue, run again now: a
	// completed, dead or cancelled one returns as Redrive brings back a
	// dead one (pending and visible now, or waiting behind its key's
	// unfinished head, with a fresh delivery budget, its dead reason and
	// finish time cleared and no lease from before reaching it), and
	// leaves the completed count; a pending one that is not visible yet
	// becomes visible now. A waiting one is left as it is: its key's line
	// says when it runs. Its error history and last error stay. A
	// processing message is refused with an error wrapping
	// ErrProcessing, and an id that names no message with one wrapping
	// ErrNotFound; either way nothing changes.
	Rerun(ctx context.Context, ids []int64) error
	// Delete deletes messages, by id, of any queue, in any state but
	// processing, and leaves the completed count of a completed one. A
	// deleted pending message that headed its key's line lets the next
	// one of the line go. A processing message is refused with an error
	// wrapping ErrProcessing, and an id that names no message with one
	// wrapping ErrNotFound; either way nothing changes.
	Delete(ctx context.Context, ids []int64) error
	// Stats counts the messages of a queue.
	Stats(ctx context.Context, queue string) (Stats, error)
	// Queues lists, sorted, the queues that hold messages in any state,
	// are paused or have a record (see CreateQueue).
	Queues(ctx context.Context) ([]string, error)
	// AllStats counts the messages of every queue that Queues lists, as
	// Stats counts one queue's, sorted by queue. The SQL backends read
	// them in one statement, each live state's counts grouped by queue
	// from the state's index and completed messages from their counts, so
	// that it costs one statement however many queues there are, not one
	// per queue.
	AllStats(ctx context.Context) ([]Stats, error)
	// QueuePage lists, sorted, a page of the queues that Queues lists: at
	// most limit (1 to MaxBatch) of those whose names come after after
	// (from the first when it is empty), or, when before is not empty, the
	// last limit of those before it; not both. The SQL backends read from
	// each index only the entries of the page's queues, so that a page
	// costs the same however many queues there are, except that the live
	// leases are read whole. On PostgreSQL names sort in the database's
	// collation, as Queues sorts them.
	QueuePage(ctx context.Context, after, before string, limit int) ([]string, error)
	// DeleteQueue deletes every message of a queue, in every state, and
	// returns how many; it forgets that the queue was paused and deletes
	// its record. Leases on them are lost. For benchmarks, tests and
	// retiring a queue.
	DeleteQueue(ctx context.Context, queue string) (int, error)
	// CreateQueue records the queue with attrs, unless it has a record
	// already, and returns the record as it stands after the call and
	// whether this call made it. An existing record is left as it is,
	// whatever attrs holds: compare its attributes with attrs to tell. Of
	// concurrent calls for one queue, exactly one makes the record, and
	// all return the same record. Attributes with empty values are not
	// kept (as SetQueueAttributes removes them). Keys are 1 to
	// MaxNameLength bytes and values any length, both UTF-8 without NUL,
	// at most MaxQueueAttributesSize bytes in all. A queue needs no record
	// to take messages, and a pause makes none.
	CreateQueue(ctx context.Context, queue string, attrs map[string]string) (QueueInfo, bool, error)
	// QueueInfo returns a queue's record; an error wrapping ErrNotFound
	// when the queue has none (it was never created, or was deleted).
	QueueInfo(ctx context.Context, queue string) (QueueInfo, error)
	// SetQueueAttributes merges attrs into the attributes of a queue's
	// record, removing each key given with an empty value, sets its
	// UpdatedAt and returns the new record. Attrs are checked as
	// CreateQueue checks them, and the merged attributes must also fit in
	// MaxQueueAttributesSize: ErrInvalid otherwise. A queue without a
	// record is ErrNotFound. Either way nothing changes.
	SetQueueAttributes(ctx context.Context, queue string, attrs map[string]string) (QueueInfo, error)
	// PurgeQueue deletes every message of a queue, in every state, as
	// DeleteQueue does, and returns how many; the queue's record and
	// whether it is paused stay. Leases on them are lost, and the
	// queue's completed count starts again from zero.
	PurgeQueue(ctx context.Context, queue string) (int, error)
	// List lists messages of a queue in one state that pass f's filters,
	// by id: in ascending order, or in descending order when f.BeforeID
	// is set. The SQL backends read a page through an index of the state,
	// of the key when f.Key is set, or of the kind for completed messages
	// when f.Kind is set, so that it costs the same however much history
	// the queue keeps; a filter on a dead reason, or on a kind of other
	// states, passes over the state's messages of other reasons or kinds.
	List(ctx context.Context, f ListFilter) ([]Info, error)
	// Get returns the message with the id, of any queue and in any state;
	// an error wrapping ErrNotFound when there is none.
	Get(ctx context.Context, id int64) (Info, error)
	// BlockedKeys lists the keys of a queue that have messages in the
	// Waiting state, with how many wait and their head, sorted by key (in
	// byte order; on PostgreSQL in the database's collation), those after
	// afterKey only, at most limit of them: 1 to MaxBatch, zero means
	// 100. A key without waiting messages is not listed.
	BlockedKeys(ctx context.Context, queue, afterKey string, limit int) ([]BlockedKey, error)
	// Scheduled lists a page of a queue's delayed messages, pending ones
	// that are not visible yet (an enqueue's delay, a retry's backoff, a
	// snooze or a release's delay), those that become visible soonest
	// first: by visible time, then id, after the position after names, at
	// most limit (1 to MaxBatch; zero means 100). Messages waiting behind
	// their key are not listed: their line says when they run. The SQL
	// backends read the pending index from the page's start on, one
	// range for each priority the queue's pending messages have, so that
	// a page costs the same however many messages are ready or later.
	Scheduled(ctx context.Context, queue string, after ScheduledAfter, limit int) ([]Info, error)
	// Throughput returns what the queue's messages did in each minute
	// from the one that holds since on, oldest first; a minute in which
	// nothing was counted is left out. The counts are kept in the
	// database as settlements commit, so every process of a database
	// reads the same, and they outlive restarts; each minute is kept at
	// least ThroughputWindow, until PruneThroughput deletes it. Deleting
	// a queue leaves its minutes.
	Throughput(ctx context.Context, queue string, since time.Time) ([]Minute, error)
	// PruneThroughput deletes the minutes of Throughput that began more
	// than olderThan ago (at least ThroughputWindow), of every queue, and
	// returns how many rows it deleted; the cleaner calls it.
	PruneThroughput(ctx context.Context, olderThan time.Duration) (int, error)
	// Prune deletes up to p.Limit finished messages (completed, dead or
	// cancelled, as p.State says) that finished more than p.OlderThan ago.
	// It never deletes a message within the dedup window of its enqueue,
	// so that a dedup id counts for the whole window whatever the
	// retention; once its message is deleted, a dedup id is forgotten. It
	// returns how many it deleted; call it until that is below p.Limit.
	Prune(ctx context.Context, p Prune) (int, error)
	// Cancel cancels messages by id, of the queue (or of any queue when
	// queue is empty): a pending or waiting one becomes Cancelled and never
	// runs; a processing one becomes Cancelled at once, so that its lease
	// is lost (its holder's Extend reports it in Extended.Cancelled, and
	// neither its completion nor its failure goes through) and it is not
	// retried. A key's next message goes on as after a completion. A
	// message that has already finished is left as it is. It returns the
	// ids it cancelled, in input order; an id that names no message of
	// the queue is ErrNotFound, and nothing changes.
	Cancel(ctx context.Context, queue string, ids []int64) ([]int64, error)
	// HoldMaintainer takes the database's maintainer lease for holder
	// until now+d, or renews it when holder has it: it succeeds when the
	// lease is free, has lapsed or is holder's. It returns the lease as it
	// stands after the call: holder holds it when Maintainer.Holder is
	// holder. One process at a time maintains a database: its reaper and
	// cleaner run; see internal/maintenance.
	HoldMaintainer(ctx context.Context, holder string, d time.Duration) (Maintainer, error)
	// ReleaseMaintainer gives up holder's maintainer lease, if holder still
	// holds it under token, so that another process takes it at its next
	// try instead of when it lapses.
	ReleaseMaintainer(ctx context.Context, holder string, token int64) error
	// Pause stops claims from a queue, in every process, until Resume:
	// Claim returns nothing for it, while enqueues, the settling of
	// messages already claimed and the reaper go on. A pause is kept in
	// the database, so it survives restarts. Pausing a paused queue does
	// nothing.
	Pause(ctx context.Context, queue string) error
	// Resume lets claims from a paused queue go on and wakes its
	// receivers. Resuming a queue that is not paused does nothing.
	Resume(ctx context.Context, queue string) error
	// Wakeup returns a channel that is closed when messages of the queue may
	// have become claimable through this process (an enqueue, a release, a
	// retry, a reap). Long polling waits on it between claims. Take the
	// channel before the claim it follows, so no wakeup is missed.
	Wakeup(queue string) <-chan struct{}
	// CancelWakeup returns a channel that is closed when a message may
	// have been cancelled after the call: through this Store value, or,
	// on PostgreSQL, through any store of the database, in any process
	// (another SQLite or memory Store value, even in this process, is
	// not heard). A worker then renews
	// its leases at once, which tells it which of its messages were
	// cancelled, rather than at its next heartbeat. Take the channel
	// before the renewal it follows, so that no cancellation is missed.
	CancelWakeup() <-chan struct{}
	// Ping checks that the store can be reached: ErrClosed once it is
	// closed, the connection's error when the database is down.
	Ping(ctx context.Context) error
	// CheckWrite proves that the database takes writes: it changes one row
	// of a table of its own in a transaction and commits it. It fails
	// where writes fail: a read-only database or file, a full disk, a
	// standby.
	CheckWrite(ctx context.Context) error
	// ServerSecret returns the database's secret of that name: 32 random
	// bytes made on the first call for the name, then the same to every
	// caller, in every process of the database and after restarts. Servers
	// that share a database key what they sign with it, so that what one
	// signs another accepts. A name is 1 to 80 bytes.
	ServerSecret(ctx context.Context, name string) ([]byte, error)
	// Close releases the store's resources.
	Close() error
}

// ListDeadLetters lists dead messages of a queue by id, after afterID, at
// most limit of them (zero means 100).
func ListDeadLetters(ctx context.Context, s Store, queue string, afterID int64, limit int) ([]DeadLetter, error) {
	infos, err := s.List(ctx, ListFilter{Queue: queue, State: Dead, AfterID: afterID, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, len(infos))
	for i, in := range infos {
		out[i] = DeadLetter{ID: in.ID, Queue: in.Queue, Key: in.Key, Payload: in.Payload, Deliveries: in.Deliveries,
			Reason: in.DeadReason, LastError: in.LastError, DeadAt: in.FinishedAt, EnqueuedAt: in.EnqueuedAt}
	}
	return out, nil
}
