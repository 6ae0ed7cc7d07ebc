package store

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits and defaults shared by every backend.
const (
	// MaxNameLength bounds queue names, keys and dedup ids, in bytes.
	MaxNameLength = 255
	// MaxBatch bounds the messages of one claim, listing or batch call.
	MaxBatch = 10_000
	// MinLease is the shortest lease.
	MinLease = time.Millisecond
	// MaxErrorLength bounds a recorded error text, in bytes.
	MaxErrorLength = 4096
	// MaxDeliveriesLimit bounds a message's delivery budget.
	MaxDeliveriesLimit = 1<<31 - 1
	// DefaultMaxDeliveries is a message's delivery budget when none is given.
	DefaultMaxDeliveries = 5
	// DefaultPayloadLimit is the largest payload a store accepts by default.
	DefaultPayloadLimit = 1 << 20
	// DefaultDedupWindow is how long a dedup id is remembered by default,
	// counted from the first message's enqueue.
	DefaultDedupWindow = 5 * time.Minute
)

// Options are the settings every backend shares. The zero value uses every
// default.
type Options struct {
	// PayloadLimit is the largest payload accepted, in bytes. Default
	// DefaultPayloadLimit.
	PayloadLimit int
	// DedupWindow is how long a dedup id is remembered. Default
	// DefaultDedupWindow.
	DedupWindow time.Duration
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.PayloadLimit == 0 {
		o.PayloadLimit = DefaultPayloadLimit
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	return o
}

// Validate reports a field out of range.
func (o Options) Validate() error {
	if o.PayloadLimit < 0 {
		return fmt.Errorf("%w: PayloadLimit is %d, must not be negative", ErrInvalid, o.PayloadLimit)
	}
	if o.DedupWindow < 0 {
		return fmt.Errorf("%w: DedupWindow is %s, must not be negative", ErrInvalid, o.DedupWindow)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// CheckQueue validates a queue name.
func CheckQueue(q string) error {
	switch {
	case q == "":
		return invalid("queue name is empty")
	case len(q) > MaxNameLength:
		return invalid("queue name is %d bytes, the limit is %d", len(q), MaxNameLength)
	case !utf8.ValidString(q):
		return invalid("queue name %q is not valid UTF-8", q)
	case strings.ContainsRune(q, 0):
		return invalid("queue name %q contains a NUL byte", q)
	}
	return nil
}

// CheckWorkerID validates a worker id: at most MaxNameLength bytes of
// UTF-8 without NUL.
func CheckWorkerID(id string) error { return checkName("worker id", id) }

func checkName(what, s string) error {
	if len(s) > MaxNameLength {
		return invalid("%s is %d bytes, the limit is %d", what, len(s), MaxNameLength)
	}
	if !utf8.ValidString(s) {
		return invalid("%s %q is not valid UTF-8", what, s)
	}
	if strings.ContainsRune(s, 0) {
		return invalid("%s %q contains a NUL byte", what, s)
	}
	return nil
}

// CheckNewMessages validates messages to enqueue and returns them with
// MaxDeliveries defaulted. The input is not modified.
func CheckNewMessages(msgs []NewMessage, o Options) ([]NewMessage, error) {
	if len(msgs) == 0 {
		return nil, invalid("no messages to enqueue")
	}
	if len(msgs) > MaxBatch {
		return nil, invalid("%d messages in one batch, the limit is %d", len(msgs), MaxBatch)
	}
	out := make([]NewMessage, len(msgs))
	for i, m := range msgs {
		if err := checkNewMessage(m, o); err != nil {
			if len(msgs) > 1 {
				return nil, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
			}
			return nil, err
		}
		if m.MaxDeliveries == 0 {
			m.MaxDeliveries = DefaultMaxDeliveries
		}
		out[i] = m
	}
	return out, nil
}

func checkNewMessage(m NewMessage, o Options) error {
	if err := CheckQueue(m.Queue); err != nil {
		return err
	}
	if len(m.Payload) > o.PayloadLimit {
		return invalid("payload is %d bytes, the limit is %d", len(m.Payload), o.PayloadLimit)
	}
	if err := checkName("key", m.Key); err != nil {
		return err
	}
	if err := checkName("dedup id", m.DedupID); err != nil {
		return err
	}
	if err := checkName("kind", m.Kind); err != nil {
		return err
	}
	if m.ReplyTo != "" {
		if err := CheckQueue(m.ReplyTo); err != nil {
			return fmt.Errorf("reply-to: %w", err)
		}
	}
	if m.Delay < 0 {
		return invalid("delay is %s, must not be negative", m.Delay)
	}
	if m.MaxDeliveries < 0 || m.MaxDeliveries > MaxDeliveriesLimit {
		return invalid("max deliveries is %d, must be 0 (the default) to %d", m.MaxDeliveries, MaxDeliveriesLimit)
	}
	return nil
}

// CheckClaim validates a claim.
func CheckClaim(c Claim) error {
	if err := CheckQueue(c.Queue); err != nil {
		return err
	}
	if c.Max < 1 || c.Max > MaxBatch {
		return invalid("claim of %d messages, must be 1 to %d", c.Max, MaxBatch)
	}
	if err := CheckLease(c.LeaseDuration); err != nil {
		return err
	}
	return CheckWorkerID(c.WorkerID)
}

// CheckLease validates a lease or extension duration.
func CheckLease(d time.Duration) error {
	if d < MinLease {
		return invalid("lease duration is %s, must be at least %s", d, MinLease)
	}
	return nil
}

// CheckExtend validates a batch extension.
func CheckExtend(ls []Lease, extension time.Duration) error {
	if err := CheckLease(extension); err != nil {
		return err
	}
	return CheckLeases(ls)
}

// CheckLeases validates a batch of leases.
func CheckLeases(ls []Lease) error {
	if len(ls) > MaxBatch {
		return invalid("%d leases in one batch, the limit is %d", len(ls), MaxBatch)
	}
	return nil
}

// CheckIDs validates a batch of message ids: at most MaxBatch, each once.
func CheckIDs(ids []int64) error {
	if len(ids) > MaxBatch {
		return invalid("%d ids in one batch, the limit is %d", len(ids), MaxBatch)
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return invalid("message %d is listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

// CheckCompletions validates completions and any replies, returning the
// replies with defaults applied (nil where a completion has none).
func CheckCompletions(cs []Completion, o Options) ([]*NewMessage, error) {
	if len(cs) > MaxBatch {
		return nil, invalid("%d completions in one batch, the limit is %d", len(cs), MaxBatch)
	}
	replies := make([]*NewMessage, len(cs))
	for i, c := range cs {
		if c.Reply == nil {
			continue
		}
		r, err := CheckNewMessages([]NewMessage{*c.Reply}, o)
		if err != nil {
			return nil, fmt.Errorf("reply to %s: %w", c.Lease, err)
		}
		replies[i] = &r[0]
	}
	return replies, nil
}

// CheckFailure validates a failure and returns it with its error text cut to
// MaxErrorLength, its reason filled in and its reply, if any, checked.
func CheckFailure(f Failure, o Options) (Failure, error) {
	if f.RetryDelay < 0 {
		return f, invalid("retry delay is %s, must not be negative", f.RetryDelay)
	}
	if f.Reply != nil {
		r, err := CheckNewMessages([]NewMessage{*f.Reply}, o)
		if err != nil {
			return f, fmt.Errorf("reply to %s: %w", f.Lease, err)
		}
		f.Reply = &r[0]
	}
	f.Error = TruncateError(f.Error)
	if f.Reason == "" {
		f.Reason = ReasonMaxDeliveries
		if f.Permanent {
			f.Reason = ReasonPermanent
		}
	}
	return f, nil
}

// CheckRelease validates a release.
func CheckRelease(r Release) error {
	if r.Delay < 0 {
		return invalid("release delay is %s, must not be negative", r.Delay)
	}
	return nil
}

// CheckLimit validates a listing limit and applies the default of 100.
func CheckLimit(limit int) (int, error) {
	if limit == 0 {
		return 100, nil
	}
	if limit < 0 || limit > MaxBatch {
		return 0, invalid("limit is %d, must be 1 to %d", limit, MaxBatch)
	}
	return limit, nil
}

// CheckListFilter validates a listing and returns its limit, defaulted.
func CheckListFilter(f ListFilter) (int, error) {
	if err := CheckQueue(f.Queue); err != nil {
		return 0, err
	}
	if f.State < Pending || f.State > Dead {
		return 0, invalid("unknown state %d", f.State)
	}
	return CheckLimit(f.Limit)
}

// CheckRetention validates DeleteCompleted's arguments.
func CheckRetention(retention time.Duration, limit int) error {
	if retention < 0 {
		return invalid("retention is %s, must not be negative", retention)
	}
	if limit < 1 || limit > MaxBatch {
		return invalid("limit is %d, must be 1 to %d", limit, MaxBatch)
	}
	return nil
}

// TruncateError cuts an error text to MaxErrorLength bytes, keeping its
// end (where a process's last words are) and valid UTF-8.
func TruncateError(s string) string {
	// Error texts come from anywhere (a script's stderr): every backend
	// must be able to store them, and PostgreSQL text takes neither NUL
	// nor invalid UTF-8.
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= MaxErrorLength {
		return s
	}
	s = s[len(s)-MaxErrorLength:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
