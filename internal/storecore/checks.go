package storecore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/store"
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{store.ErrInvalid}, args...)...)
}

// CheckQueue validates a queue name.
func CheckQueue(q string) error {
	switch {
	case q == "":
		return invalid("queue name is empty")
	case len(q) > store.MaxNameLength:
		return invalid("queue name is %d bytes, the limit is %d", len(q), store.MaxNameLength)
	case !utf8.ValidString(q):
		return invalid("queue name %q is not valid UTF-8", q)
	case strings.ContainsRune(q, 0):
		return invalid("queue name %q contains a NUL byte", q)
	}
	return nil
}

// CheckWorkerID validates a worker id: at most store.MaxNameLength bytes of
// UTF-8 without NUL.
func CheckWorkerID(id string) error { return checkName("worker id", id) }

func checkName(what, s string) error {
	if len(s) > store.MaxNameLength {
		return invalid("%s is %d bytes, the limit is %d", what, len(s), store.MaxNameLength)
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
func CheckNewMessages(msgs []store.NewMessage, o store.Options) ([]store.NewMessage, error) {
	if len(msgs) == 0 {
		return nil, invalid("no messages to enqueue")
	}
	if len(msgs) > store.MaxBatch {
		return nil, invalid("%d messages in one batch, the limit is %d", len(msgs), store.MaxBatch)
	}
	out := make([]store.NewMessage, len(msgs))
	for i, m := range msgs {
		if err := checkNewMessage(m, o); err != nil {
			if len(msgs) > 1 {
				return nil, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
			}
			return nil, err
		}
		if m.MaxDeliveries == 0 {
			m.MaxDeliveries = store.DefaultMaxDeliveries
		}
		out[i] = m
	}
	return out, nil
}

func checkNewMessage(m store.NewMessage, o store.Options) error {
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
	if m.Priority < store.MinPriority || m.Priority > store.MaxPriority {
		return invalid("priority is %d, must be %d to %d", m.Priority, store.MinPriority, store.MaxPriority)
	}
	if m.MaxDeliveries < 0 || m.MaxDeliveries > store.MaxDeliveriesLimit {
		return invalid("max deliveries is %d, must be 0 (the default) to %d", m.MaxDeliveries, store.MaxDeliveriesLimit)
	}
	return nil
}

// CheckClaim validates a claim.
func CheckClaim(c store.Claim) error {
	if err := CheckQueue(c.Queue); err != nil {
		return err
	}
	if c.Max < 1 || c.Max > store.MaxBatch {
		return invalid("claim of %d messages, must be 1 to %d", c.Max, store.MaxBatch)
	}
	if err := CheckLease(c.LeaseDuration); err != nil {
		return err
	}
	return CheckWorkerID(c.WorkerID)
}

// CheckLease validates a lease or extension duration.
func CheckLease(d time.Duration) error {
	if d < store.MinLease {
		return invalid("lease duration is %s, must be at least %s", d, store.MinLease)
	}
	return nil
}

// CheckExtend validates a batch extension.
func CheckExtend(ls []store.Lease, extension time.Duration) error {
	if err := CheckLease(extension); err != nil {
		return err
	}
	return CheckLeases(ls)
}

// CheckLeases validates a batch of leases.
func CheckLeases(ls []store.Lease) error {
	if len(ls) > store.MaxBatch {
		return invalid("%d leases in one batch, the limit is %d", len(ls), store.MaxBatch)
	}
	return nil
}

// CheckIDs validates a batch of message ids: at most store.MaxBatch, each once.
func CheckIDs(ids []int64) error {
	if len(ids) > store.MaxBatch {
		return invalid("%d ids in one batch, the limit is %d", len(ids), store.MaxBatch)
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
// replies with defaults applied (nil where a completion has none), or nil
// when no completion has a reply.
func CheckCompletions(cs []store.Completion, o store.Options) ([]*store.NewMessage, error) {
	if len(cs) > store.MaxBatch {
		return nil, invalid("%d completions in one batch, the limit is %d", len(cs), store.MaxBatch)
	}
	var replies []*store.NewMessage
	for i, c := range cs {
		if c.Reply == nil {
			continue
		}
		if replies == nil {
			replies = make([]*store.NewMessage, len(cs))
		}
		r, err := CheckNewMessages([]store.NewMessage{*c.Reply}, o)
		if err != nil {
			return nil, fmt.Errorf("reply to %s: %w", c.Lease, err)
		}
		replies[i] = &r[0]
	}
	return replies, nil
}

// CheckFailure validates a failure and returns it with its error text cut to
// store.MaxErrorLength, its reason filled in and its reply, if any, checked.
func CheckFailure(f store.Failure, o store.Options) (store.Failure, error) {
	if f.RetryDelay < 0 {
		return f, invalid("retry delay is %s, must not be negative", f.RetryDelay)
	}
	if f.Reply != nil {
		r, err := CheckNewMessages([]store.NewMessage{*f.Reply}, o)
		if err != nil {
			return f, fmt.Errorf("reply to %s: %w", f.Lease, err)
		}
		f.Reply = &r[0]
	}
	f.Error = TruncateError(f.Error)
	if f.Reason == "" {
		f.Reason = store.ReasonMaxDeliveries
		if f.Permanent {
			f.Reason = store.ReasonPermanent
		}
	}
	return f, nil
}

// CheckRelease validates a release.
func CheckRelease(r store.Release) error {
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
	if limit < 0 || limit > store.MaxBatch {
		return 0, invalid("limit is %d, must be 1 to %d", limit, store.MaxBatch)
	}
	return limit, nil
}

// CheckListFilter validates a listing and returns its limit, defaulted.
func CheckListFilter(f store.ListFilter) (int, error) {
	if err := CheckQueue(f.Queue); err != nil {
		return 0, err
	}
	if f.State < store.Pending || int(f.State) >= store.States {
		return 0, invalid("unknown state %d", f.State)
	}
	return CheckLimit(f.Limit)
}

// CheckPrune validates a pruning.
func CheckPrune(p store.Prune) error {
	if p.Queue != "" {
		if err := CheckQueue(p.Queue); err != nil {
			return err
		}
	}
	if p.State != store.Completed && p.State != store.Dead && p.State != store.Cancelled {
		return invalid("cannot prune %s messages: only completed, dead or cancelled ones", p.State)
	}
	if p.OlderThan < 0 {
		return invalid("the age to prune from is %s, must not be negative", p.OlderThan)
	}
	if p.Limit < 1 || p.Limit > store.MaxBatch {
		return invalid("limit is %d, must be 1 to %d", p.Limit, store.MaxBatch)
	}
	return nil
}

// TruncateError cuts an error text to store.MaxErrorLength bytes, keeping its
// end (where a process's last words are) and valid UTF-8.
func TruncateError(s string) string {
	// Error texts come from anywhere (a script's stderr): every backend
	// must be able to store them, and PostgreSQL text takes neither NUL
	// nor invalid UTF-8.
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= store.MaxErrorLength {
		return s
	}
	s = s[len(s)-store.MaxErrorLength:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// LostLeases returns the leases that are not in extended, in input order:
// the result of a batch extension.
func LostLeases(leases []store.Lease, extended map[store.Lease]bool) []store.Lease {
	var lost []store.Lease
	for _, l := range leases {
		if !extended[l] {
			lost = append(lost, l)
		}
	}
	return lost
}

// NoMessage is the error for an id that names no message of the queue, or
// of any queue when queue is empty.
func NoMessage(queue string, id int64) error {
	if queue == "" {
		return fmt.Errorf("%w: no message %d", store.ErrNotFound, id)
	}
	return fmt.Errorf("%w: queue %q has no message %d", store.ErrNotFound, queue, id)
}
