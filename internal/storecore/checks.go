package storecore

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
	return checkText(what, s)
}

// checkText validates text that a SQL backend compares: UTF-8 without NUL.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return invalid("%s %q is not valid UTF-8", what, s)
	}
	if strings.ContainsRune(s, 0) {
		return invalid("%s %q contains a NUL byte", what, s)
	}
	return nil
}

// CheckNewMessages validates messages to enqueue and returns them with
// MaxDeliveries defaulted and empty attributes made nil. The input is not
// modified.
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
				return nil, &store.BatchError{Index: i, Len: len(msgs), Err: err}
			}
			return nil, err
		}
		if m.MaxDeliveries == 0 {
			m.MaxDeliveries = store.DefaultMaxDeliveries
		}
		if len(m.Attributes) == 0 {
			m.Attributes = nil // none, stored as none
		}
		if m.UniqueKey != "" && len(m.UniqueStates) == 0 {
			m.UniqueStates = store.DefaultUniqueStates
		}
		out[i] = m
	}
	return out, nil
}

func checkNewMessage(m store.NewMessage, o store.Options) error {
	if err := CheckQueue(m.Queue); err != nil {
		return err
	}
	switch size := len(m.Payload) + len(m.Attributes); {
	case size <= o.PayloadLimit:
	case len(m.Attributes) == 0:
		return invalid("payload is %d bytes, the limit is %d", len(m.Payload), o.PayloadLimit)
	default:
		return invalid("payload and attributes are %d bytes (%d and %d), the limit is %d",
			size, len(m.Payload), len(m.Attributes), o.PayloadLimit)
	}
	if err := checkName("key", m.Key); err != nil {
		return err
	}
	if err := checkName("fair group", m.FairGroup); err != nil {
		return err
	}
	if m.FairGroup != "" && m.Key != "" {
		return invalid("fair group %q is given with key %q: a keyed message is ordered by its key, not placed by a group", m.FairGroup, m.Key)
	}
	if err := checkName("unique key", m.UniqueKey); err != nil {
		return err
	}
	if len(m.UniqueStates) > 0 && m.UniqueKey == "" {
		return invalid("unique states are given without a unique key")
	}
	for _, st := range m.UniqueStates {
		if st < 0 || int(st) >= store.States {
			return invalid("unique state %d is not a state", int(st))
		}
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
	return checkDeadLetterQueue(m.Queue, m.DeadLetterQueue)
}

// checkDeadLetterQueue validates the dead-letter queue of messages of
// queue: none, or another valid queue name.
func checkDeadLetterQueue(queue, dlq string) error {
	if dlq == "" {
		return nil
	}
	if err := CheckQueue(dlq); err != nil {
		return fmt.Errorf("dead-letter queue: %w", err)
	}
	if dlq == queue {
		return invalid("dead-letter queue %q is the message's own queue", dlq)
	}
	return nil
}

// CheckMove validates a move and returns it with its budget defaulted.
func CheckMove(m store.Move) (store.Move, error) {
	if err := CheckQueue(m.Queue); err != nil {
		return m, err
	}
	if m.State != store.Pending && m.State != store.Dead {
		return m, invalid("a move takes pending or dead messages, not %s ones", m.State)
	}
	if m.To != "" {
		if err := CheckQueue(m.To); err != nil {
			return m, fmt.Errorf("move target: %w", err)
		}
		if m.To == m.Queue {
			return m, invalid("a move's target %q is the queue it moves from", m.To)
		}
	}
	if m.Limit < 1 || m.Limit > store.MaxBatch {
		return m, invalid("move of %d messages, must be 1 to %d", m.Limit, store.MaxBatch)
	}
	if m.MaxDeliveries < 0 || m.MaxDeliveries > store.MaxDeliveriesLimit {
		return m, invalid("max deliveries is %d, must be 0 (the default) to %d", m.MaxDeliveries, store.MaxDeliveriesLimit)
	}
	if m.MaxDeliveries == 0 {
		m.MaxDeliveries = store.DefaultMaxDeliveries
	}
	if m.DeadLetterQueue != "" {
		if err := checkDeadLetterQueue(m.To, m.DeadLetterQueue); err != nil {
			return m, err
		}
	}
	return m, nil
}

// CheckClaim validates a claim.
func CheckClaim(c store.Claim) error {
	if err := CheckQueue(c.Queue); err != nil {
		return err
	}
	if c.Max < 1 || c.Max > store.MaxBatch {
		return invalid("claim of %d messages, must be 1 to %d", c.Max, store.MaxBatch)
	}
	if c.Independent && !c.Runs {
		return invalid("claim with Independent but without Runs: independent leases are a mode of runs")
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
	if err := checkDeadLetterQueue("", f.DeadLetterQueue); err != nil {
		return f, err
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
	if r.Snooze && !r.Uncount {
		return invalid("a snooze is a release with Uncount: a counted release is a failure")
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
	if err := checkName("key filter", f.Key); err != nil {
		return 0, err
	}
	if err := checkName("kind filter", f.Kind); err != nil {
		return 0, err
	}
	if f.Reason != "" {
		if f.State != store.Dead {
			return 0, invalid("a dead reason filters dead messages only, not %s ones", f.State)
		}
		if err := checkText("dead reason filter", string(f.Reason)); err != nil {
			return 0, err
		}
	}
	if f.BeforeID < 0 {
		return 0, invalid("before id is %d, must not be negative", f.BeforeID)
	}
	return CheckLimit(f.Limit)
}

// CheckBlockedKeys validates a listing of blocked keys and returns its
// limit, defaulted.
func CheckBlockedKeys(queue, afterKey string, limit int) (int, error) {
	if err := CheckQueue(queue); err != nil {
		return 0, err
	}
	if err := checkName("after key", afterKey); err != nil {
		return 0, err
	}
	return CheckLimit(limit)
}

// CheckScheduled validates a listing of delayed messages and returns its
// limit, defaulted.
func CheckScheduled(queue string, after store.ScheduledAfter, limit int) (int, error) {
	if err := CheckQueue(queue); err != nil {
		return 0, err
	}
	if after.ID < 0 {
		return 0, invalid("after id is %d, must not be negative", after.ID)
	}
	return CheckLimit(limit)
}

// CheckPruneThroughput validates the age from which PruneThroughput
// deletes: never within store.ThroughputWindow.
func CheckPruneThroughput(olderThan time.Duration) error {
	if olderThan < store.ThroughputWindow {
		return invalid("the age to prune throughput from is %s, must be at least %s", olderThan, store.ThroughputWindow)
	}
	return nil
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

// CheckQueueAttributes validates the attributes of a queue's record, as
// one call gives them: keys of 1 to store.MaxNameLength bytes, keys and
// values of UTF-8 without NUL, at most store.MaxQueueAttributesSize bytes
// in all. Keys are checked in order, so that the error names the first
// bad one.
func CheckQueueAttributes(attrs map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[k]
		if k == "" {
			return invalid("a queue attribute's key is empty")
		}
		if err := checkName("queue attribute key", k); err != nil {
			return err
		}
		// A value may be long: the error names its key, not the value.
		if !utf8.ValidString(v) {
			return invalid("queue attribute %q has a value that is not valid UTF-8", k)
		}
		if strings.ContainsRune(v, 0) {
			return invalid("queue attribute %q has a value that contains a NUL byte", k)
		}
	}
	return checkAttributesSize("queue attributes are", attrs)
}

// checkAttributesSize reports attributes over store.MaxQueueAttributesSize,
// in a sentence that what begins.
func checkAttributesSize(what string, attrs map[string]string) error {
	if n := AttributesSize(attrs); n > store.MaxQueueAttributesSize {
		return invalid("%s %d bytes, the limit is %d", what, n, store.MaxQueueAttributesSize)
	}
	return nil
}

// AttributesSize is the size of a queue's attributes, as
// store.MaxQueueAttributesSize bounds it: the bytes of their keys and
// values added up.
func AttributesSize(attrs map[string]string) int {
	n := 0
	for k, v := range attrs {
		n += len(k) + len(v)
	}
	return n
}

// NewQueueAttributes returns the attributes a new record keeps of attrs,
// checked by CheckQueueAttributes: a copy without the keys whose values
// are empty. It is never nil.
func NewQueueAttributes(attrs map[string]string) map[string]string {
	return MergeQueueAttributes(nil, attrs)
}

// MergeQueueAttributes returns a record's attributes old with changes, as
// SetQueueAttributes merges them: each key of changes set to its value,
// or removed when the value is empty. Neither map is modified; the result
// is a new map, never nil. The result may exceed
// store.MaxQueueAttributesSize: see CheckMergedAttributes.
func MergeQueueAttributes(old, changes map[string]string) map[string]string {
	out := make(map[string]string, len(old)+len(changes))
	maps.Copy(out, old)
	for k, v := range changes {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// CheckMergedAttributes reports attributes, merged by
// MergeQueueAttributes, that a record cannot keep: more than
// store.MaxQueueAttributesSize bytes. A backend checks them inside the
// transaction that reads the record, before it writes anything.
func CheckMergedAttributes(queue string, merged map[string]string) error {
	return checkAttributesSize(fmt.Sprintf("the attributes of queue %q would be", queue), merged)
}

// MergeEncoded is what a SQL backend's SetQueueAttributes writes: the
// record's attributes merged with changes, checked, and encoded.
func MergeEncoded(queue string, old, changes map[string]string) (map[string]string, string, error) {
	merged := MergeQueueAttributes(old, changes)
	if err := CheckMergedAttributes(queue, merged); err != nil {
		return nil, "", err
	}
	text, err := EncodeQueueAttributes(merged)
	return merged, text, err
}

// NoQueue is the error for a queue without a record (see
// store.Store.CreateQueue).
func NoQueue(queue string) error { return &store.NoRecordError{Queue: queue} }

// EncodeQueueAttributes encodes a record's attributes for a SQL backend:
// a JSON object of strings, "{}" for none.
func EncodeQueueAttributes(attrs map[string]string) (string, error) {
	if attrs == nil {
		attrs = map[string]string{}
	}
	b, err := json.Marshal(attrs)
	if err != nil {
		return "", fmt.Errorf("encode queue attributes: %w", err)
	}
	return string(b), nil
}

// DecodeQueueAttributes decodes what EncodeQueueAttributes wrote; empty
// text (a NULL) is none. The result is never nil.
func DecodeQueueAttributes(text string) (map[string]string, error) {
	attrs := map[string]string{}
	if text == "" {
		return attrs, nil
	}
	if err := json.Unmarshal([]byte(text), &attrs); err != nil {
		return nil, fmt.Errorf("decode queue attributes: %w", err)
	}
	return attrs, nil
}

// StateMask gives states as a bit mask, bit n for state n: how the SQL
// backends pass a set of states as one argument.
func StateMask(states []store.State) int {
	mask := 0
	for _, st := range states {
		mask |= 1 << st
	}
	return mask
}
