package sqsapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/leasehold/leasehold/internal/sqsid"
	"github.com/leasehold/leasehold/store"
)

// sendEntry is one message to send: SendMessage's input, or an entry of
// SendMessageBatch's.
type sendEntry struct {
	Id                      string               `json:"Id"`
	MessageBody             *string              `json:"MessageBody"`
	DelaySeconds            *int                 `json:"DelaySeconds"`
	MessageAttributes       map[string]attrValue `json:"MessageAttributes"`
	MessageSystemAttributes map[string]attrValue `json:"MessageSystemAttributes"`
	// MessageDeduplicationId and MessageGroupId are nil when absent: an
	// empty one is given, and invalid, as in SQS.
	MessageDeduplicationId *string `json:"MessageDeduplicationId"`
	MessageGroupId         *string `json:"MessageGroupId"`
}

// sent is the outcome of sending one message.
type sent struct {
	Id                           string `json:"Id,omitempty"`
	MessageId                    string `json:"MessageId"`
	MD5OfMessageBody             string `json:"MD5OfMessageBody"`
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty"`
	SequenceNumber               string `json:"SequenceNumber,omitempty"`
}

// maxMessageIDLength bounds group and deduplication ids, as SQS does.
const maxMessageIDLength = 128

// origin is what a send request tells of its messages beyond their
// entries: the X-Amzn-Trace-Id header, which becomes the AWSTraceHeader
// of messages that set none, and whether they come in a batch.
type origin struct {
	traceHeader string
	batch       bool
}

// origin is the origin of the messages c sends.
func (a *API) origin(c *call) origin {
	return origin{traceHeader: c.r.Header.Get("X-Amzn-Trace-Id")}
}

// senderID is the SenderId of messages: the access key id that every
// request must be signed with (servers of one database share it), or the
// account id when requests go unsigned. It is not kept with each message,
// whose bytes count against the store's limit.
func (a *API) senderID() string {
	if a.cfg.Verifier != nil {
		return a.cfg.Verifier.AccessKeyID()
	}
	return a.cfg.AccountID
}

// prepare checks one message for queue q and makes it into what the store
// enqueues. It returns the message's size too.
func prepare(q *queue, e *sendEntry, from origin) (store.NewMessage, sent, int, *apiError) {
	var none store.NewMessage
	if e.MessageBody == nil || *e.MessageBody == "" {
		return none, sent{}, 0, errMissingParameter.f("The request must contain the parameter MessageBody.")
	}
	body := *e.MessageBody
	if !validText(body) {
		return none, sent{}, 0, errInvalidMessageContents.f("the message body holds characters outside those SQS allows")
	}
	msgSize, err := checkAttrs(e.MessageAttributes, false)
	if err != nil {
		return none, sent{}, 0, err
	}
	// System attributes do not count towards a message's size, as in SQS.
	if _, err := checkAttrs(e.MessageSystemAttributes, true); err != nil {
		return none, sent{}, 0, err
	}
	size := len(body) + msgSize
	if size > q.maxSize {
		// Amazon SQS words this one way for SendMessage and another for
		// an entry of a batch.
		verdict := "are invalid"
		if from.batch {
			verdict = "cannot be validated"
		}
		return none, sent{}, 0, errInvalidParameter.f("One or more parameters %s. Reason: Message must be shorter than %d bytes.", verdict, q.maxSize)
	}
	delay := q.delay
	// A FIFO queue takes no delay of a message's own: a DelaySeconds of
	// 0 (what some clients always send) leaves the queue's, as in SQS.
	if e.DelaySeconds != nil && !(q.fifo && *e.DelaySeconds == 0) {
		if q.fifo {
			return none, sent{}, 0, errInvalidParameter.f("Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", *e.DelaySeconds)
		}
		if *e.DelaySeconds < 0 || *e.DelaySeconds > 900 {
			return none, sent{}, 0, errInvalidParameter.f("Value %d for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.", *e.DelaySeconds)
		}
		delay = time.Duration(*e.DelaySeconds) * time.Second
	}
	for what, v := range map[string]*string{"MessageGroupId": e.MessageGroupId, "MessageDeduplicationId": e.MessageDeduplicationId} {
		if v == nil {
			continue
		}
		if err := checkMessageID(what, *v); err != nil {
			return none, sent{}, 0, err
		}
	}
	group, dedup := deref(e.MessageGroupId), deref(e.MessageDeduplicationId)
	if q.fifo {
		if group == "" {
			return none, sent{}, 0, errMissingParameter.f("The request must contain the parameter MessageGroupId.")
		}
		if dedup == "" {
			if !q.contentDedup {
				return none, sent{}, 0, errInvalidParameter.f("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
			}
			sum := sha256.Sum256([]byte(body))
			dedup = hex.EncodeToString(sum[:])
		}
	}
	kept := storedAttrs{Message: e.MessageAttributes, System: e.MessageSystemAttributes}
	if from.traceHeader != "" && kept.System["AWSTraceHeader"].StringValue == nil && validText(from.traceHeader) {
		kept.System = maps.Clone(kept.System)
		if kept.System == nil {
			kept.System = map[string]attrValue{}
		}
		kept.System["AWSTraceHeader"] = attrValue{DataType: "String", StringValue: &from.traceHeader}
	}
	// On a FIFO queue the group is the store's key: one message of a
	// group in flight, in order. On a standard queue a group orders
	// nothing, as in SQS: it is the tenant of a fair queue (the store's
	// fairness group), kept with the message and given back.
	key, fair := group, ""
	if !q.fifo {
		kept.Group, fair, key = key, key, ""
	}
	// Deduplication within each group: the store, which deduplicates
	// within the queue, gets an id of the group and the message's.
	if q.fifo && q.dedupByGroup {
		sum := sha256.Sum256([]byte(key + "\x00" + dedup))
		kept.Dedup, dedup = dedup, "g:"+hex.EncodeToString(sum[:])
	}
	msg := store.NewMessage{Queue: q.name(), Payload: []byte(body), Key: key, FairGroup: fair, DedupID: dedup, Delay: delay,
		MaxDeliveries: q.maxDeliveries(), Attributes: kept.encode(), DeadLetterQueue: q.deadLetterQueue}
	out := sent{Id: e.Id, MD5OfMessageBody: bodyMD5(body), MD5OfMessageAttributes: attrsMD5(e.MessageAttributes),
		MD5OfMessageSystemAttributes: attrsMD5(e.MessageSystemAttributes)}
	return msg, out, size, nil
}

// send enqueues msgs, sharing a store call with other requests when they
// carry no deduplication id (a store call deduplicates against what is
// stored, not within itself). Should a shared call refuse its input, each
// request tries alone, so that none fails for another's messages: a
// refused enqueue changed nothing.
func (a *API) send(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
	for _, m := range msgs {
		if m.DedupID != "" {
			return a.st.Enqueue(ctx, msgs)
		}
	}
	res, err := a.enqueues.do(ctx, msgs)
	if errors.Is(err, store.ErrInvalid) {
		return a.st.Enqueue(ctx, msgs)
	}
	return res, err
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// sequenceNumber is a FIFO queue's sequence number of a message: its id,
// zero-padded to 20 digits, so that the numbers sort as strings too.
func sequenceNumber(id int64) string { return fmt.Sprintf("%020d", id) }

// checkMessageID applies SQS's rules to a group or deduplication id
// given: 1 to 128 printable ASCII characters.
func checkMessageID(what, v string) *apiError {
	invalid := func() *apiError {
		return errInvalidParameter.f("Value %s for parameter %s is invalid. Reason: %s can only include alphanumeric and punctuation characters. 1 to %d in length.", v, what, what, maxMessageIDLength)
	}
	if v == "" || len(v) > maxMessageIDLength {
		return invalid()
	}
	for _, c := range []byte(v) {
		if c < 0x21 || c > 0x7e {
			return invalid()
		}
	}
	return nil
}

// finish fills in what the store's answer gives: the message id, and a
// FIFO queue's sequence number.
func (s *sent) finish(ids sqsid.Mapper, q *queue, e store.Enqueued) {
	s.MessageId = ids.MessageID(e.ID)
	if q.fifo {
		s.SequenceNumber = sequenceNumber(e.ID)
	}
}

func (a *API) sendMessage(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		sendEntry
	}
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	msg, out, _, aerr := prepare(q, &in.sendEntry, a.origin(c))
	if aerr != nil {
		return nil, aerr
	}
	res, err := a.send(ctx, []store.NewMessage{msg})
	if err != nil {
		return nil, err
	}
	out.Id = ""
	out.finish(a.cfg.MessageIDs, q, res[0])
	return out, nil
}

// sendBatch is SendMessageBatch's input.
type sendBatch struct {
	queueInput
	Entries []sendEntry `json:"Entries"`
}

func (b *sendBatch) entryIDs() []string { return entryIDs(b.Entries) }

func (e sendEntry) entryID() string { return e.Id }

// entryIDs are the ids of a batch's entries.
func entryIDs[E interface{ entryID() string }](entries []E) []string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.entryID()
	}
	return ids
}

// batchFailure is a failed entry of a batch.
type batchFailure struct {
	Id          string `json:"Id"`
	SenderFault bool   `json:"SenderFault"`
	Code        string `json:"Code"`
	Message     string `json:"Message"`
}

func failure(id string, e *apiError) batchFailure {
	return batchFailure{Id: id, SenderFault: !e.server && e.status < 500, Code: e.code, Message: e.message}
}

// batchOutput is the output of every batch action. An empty list is
// left out, as SQS's JSON protocol leaves it.
type batchOutput[T any] struct {
	Successful []T            `json:"Successful,omitempty"`
	Failed     []batchFailure `json:"Failed,omitempty"`
	// causes are the details of Failed's server-side failures, which the
	// response does not carry.
	causes []error
}

func (a *API) sendMessageBatch(ctx context.Context, c *call) (any, error) {
	var in sendBatch
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	if q.fifo {
		// A FIFO batch with an entry that has no group, or no
		// deduplication id where the queue does not make one, fails as a
		// whole, as in SQS, not entry by entry.
		for _, e := range in.Entries {
			if e.MessageGroupId == nil {
				return nil, errInvalidParameter.f("The request must contain the parameter MessageGroupId.")
			}
			if e.MessageDeduplicationId == nil && !q.contentDedup {
				return nil, errInvalidParameter.f("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
			}
		}
	}
	var out batchOutput[sent]
	from := a.origin(c)
	from.batch = true
	var msgs []store.NewMessage
	var oks []sent
	total := 0
	for i := range in.Entries {
		msg, s, size, aerr := prepare(q, &in.Entries[i], from)
		if aerr != nil {
			out.Failed = append(out.Failed, failure(in.Entries[i].Id, aerr))
			continue
		}
		total += size
		msgs, oks = append(msgs, msg), append(oks, s)
	}
	if total > maxMessageSize {
		return nil, errBatchTooLong.f("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", maxMessageSize, total)
	}
	if len(msgs) > 0 {
		res, err := a.send(ctx, msgs)
		if err != nil {
			return nil, err
		}
		for i := range oks {
			oks[i].finish(a.cfg.MessageIDs, q, res[i])
		}
		out.Successful = oks
	}
	return out, nil
}

// maxBatch is how many entries a batch takes at most.
const maxBatch = 10

// checkBatchIDs applies SQS's rules to a batch's entries: 1 to 10, ids of
// 1 to 80 letters, digits, hyphens and underscores, none twice.
func checkBatchIDs(ids []string) *apiError {
	n := len(ids)
	switch {
	case n == 0:
		return errEmptyBatch.f("there should be at least one entry in the request")
	case n > maxBatch:
		return errTooManyEntries.f("Maximum number of entries per request are %d. You have sent %d.", maxBatch, n)
	}
	seen := make(map[string]bool, n)
	for _, s := range ids {
		if s == "" || len(s) > 80 || !onlyNameChars(s, "") {
			return errInvalidBatchEntryID.f("A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[s] {
			return errBatchIDsNotDistinct.f("id %s repeated", s)
		}
		seen[s] = true
	}
	return nil
}
