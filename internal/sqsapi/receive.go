package sqsapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/store"
)

// zeroVisibilityLease is the lease of a receive whose visibility timeout
// is zero, given back before the receive answers.
const zeroVisibilityLease = time.Second

// systemAttributeNames are the message system attributes a receive may
// ask for.
var systemAttributeNames = []string{"All", "SenderId", "SentTimestamp", "ApproximateReceiveCount",
	"ApproximateFirstReceiveTimestamp", "SequenceNumber", "MessageDeduplicationId", "MessageGroupId",
	"AWSTraceHeader", "DeadLetterQueueSourceArn"}

type message struct {
	MessageId              string               `json:"MessageId"`
	ReceiptHandle          string               `json:"ReceiptHandle"`
	MD5OfBody              string               `json:"MD5OfBody"`
	Body                   string               `json:"Body"`
	Attributes             map[string]string    `json:"Attributes,omitempty"`
	MD5OfMessageAttributes string               `json:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      map[string]attrValue `json:"MessageAttributes,omitempty"`
}

func (a *API) receiveMessage(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
		VisibilityTimeout           *int     `json:"VisibilityTimeout"`
		WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
		AttributeNames              []string `json:"AttributeNames"`
		MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
		MessageAttributeNames       []string `json:"MessageAttributeNames"`
	}
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	n, visibility, wait := 1, q.visibility, q.wait
	if m := in.MaxNumberOfMessages; m != nil {
		if *m < 1 || *m > maxBatch {
			return nil, errInvalidParameter.f("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and %d, if provided.", *m, maxBatch)
		}
		n = *m
	}
	if in.VisibilityTimeout != nil {
		var aerr *apiError
		if visibility, aerr = visibilityTimeout(in.VisibilityTimeout); aerr != nil {
			return nil, aerr
		}
	}
	if w := in.WaitTimeSeconds; w != nil {
		if *w < 0 || *w > 20 {
			return nil, errInvalidParameter.f("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *w)
		}
		wait = time.Duration(*w) * time.Second
	}
	sysNames, aerr := systemNames(append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...))
	if aerr != nil {
		return nil, aerr
	}
	// A visibility timeout of zero makes the messages receivable again at
	// once, as in SQS: they are claimed under a short lease and given back
	// before the receive answers, the receive counted (see giveBack).
	zero := visibility == 0
	if zero {
		visibility = zeroVisibilityLease
	}

	// On a FIFO queue a receive takes a group's messages together, in
	// order: a claim with runs. Each message keeps a visibility timeout
	// of its own, as in SQS: one that becomes visible again goes back
	// alone, while the rest stay hidden, and no receive gets a message of
	// the group behind one that is hidden (independent leases).
	mb := mailbox.New(mailbox.Config{Store: a.receives, Queue: q.name(), WorkerID: a.cfg.WorkerID, PollInterval: a.cfg.PollInterval, Clock: a.clk})
	got, err := mb.Receive(ctx, mailbox.ReceiveOptions{Max: n, Visibility: visibility, Wait: wait, Stop: a.drain.Done(),
		Runs: q.fifo, Independent: q.fifo})
	if err != nil {
		return nil, err
	}
	var out struct {
		Messages []message `json:"Messages,omitempty"`
	}
	kept := make([]store.Lease, 0, len(got))
	for _, m := range got {
		if q.maxReceive > 0 && m.Attempt > q.maxReceive {
			// Sent before its queue's redrive policy was set or lowered:
			// the policy holds at receive time, as in SQS.
			if err := a.overReceived(ctx, q, m); err != nil {
				return nil, err
			}
			continue
		}
		kept = append(kept, m.Lease)
		out.Messages = append(out.Messages, a.receivedMessage(c.r, q, m, sysNames, in.MessageAttributeNames))
	}
	if zero {
		if err := a.giveBack(ctx, kept); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// giveBack makes received messages visible again at once, their receive
// counted, as a visibility timeout of zero asks: a counted release of
// each (so that, as with ChangeMessageVisibility to zero, a message on
// its last allowed receive is dead). Their handles still delete them on
// a standard queue, until another receive takes them; a FIFO queue's
// have expired. They go back in the order received, so that the groups
// a receive took are received again in their old order (the leases of a
// FIFO queue's runs are independent: none brings back another). A
// message that cannot be given back comes back when its short lease
// ends.
func (a *API) giveBack(ctx context.Context, leases []store.Lease) error {
	for _, l := range leases {
		if err := a.st.Release(ctx, store.Release{Lease: l}); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			return err
		}
	}
	return nil
}

// overReceived dead-letters a message received more often than its
// queue's maxReceiveCount allows: it moves to the policy's dead-letter
// queue, in the store's transaction, or stays dead here when the policy
// names none. The receive that found it is not counted, as in SQS, so
// that it arrives with the receive count it had. Should that fail, the
// message is still leased and comes back when the lease ends.
func (a *API) overReceived(ctx context.Context, q *queue, m *mailbox.Message) error {
	_, err := a.st.Fail(ctx, store.Failure{Lease: m.Lease, Permanent: true, Reason: store.ReasonMaxDeliveries,
		Error:           fmt.Sprintf("received %d times; the queue's maxReceiveCount is %d", m.Attempt-1, q.maxReceive),
		DeadLetterQueue: q.deadLetterQueue, Uncount: true})
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		return err
	}
	return nil
}

func (a *API) receivedMessage(r *http.Request, q *queue, m *mailbox.Message, sysNames, attrNames []string) message {
	body := string(m.Payload)
	stored := decodeAttrs(m.Attributes)
	out := message{MessageId: a.cfg.MessageIDs.MessageID(m.MessageID), ReceiptHandle: a.receipts.format(q.name(), m.Lease),
		MD5OfBody: bodyMD5(body), Body: body, MessageAttributes: selectAttrs(stored.Message, attrNames)}
	out.MD5OfMessageAttributes = attrsMD5(out.MessageAttributes)
	if len(sysNames) == 0 {
		return out
	}
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	all := map[string]string{
		"SentTimestamp":                    ms(m.EnqueuedAt),
		"ApproximateReceiveCount":          strconv.Itoa(m.Attempt),
		"ApproximateFirstReceiveTimestamp": ms(m.FirstClaimedAt),
	}
	// A standard queue's group is kept with the message; a FIFO queue's
	// is its key (and so is that of a message a Go program sent).
	if g := cmp.Or(m.Key, stored.Group); g != "" {
		all["MessageGroupId"] = g
	}
	all["SenderId"] = a.senderID()
	if d := cmp.Or(stored.Dedup, m.DedupID); d != "" {
		all["MessageDeduplicationId"] = d
	}
	if q.fifo {
		all["SequenceNumber"] = sequenceNumber(m.MessageID)
	}
	if m.DeadLetterSource != "" {
		all["DeadLetterQueueSourceArn"] = a.queueARN(r, m.DeadLetterSource)
	}
	if t, ok := stored.System["AWSTraceHeader"]; ok && t.StringValue != nil {
		all["AWSTraceHeader"] = *t.StringValue
	}
	out.Attributes = map[string]string{}
	for k, v := range all {
		if slices.Contains(sysNames, "All") || slices.Contains(sysNames, k) {
			out.Attributes[k] = v
		}
	}
	return out
}

// systemNames checks the message system attributes a receive asks for:
// SQS's names, All or .* for every one (as for message attributes), and
// the queue attributes that AttributeNames, typed as queue attribute
// names, may carry and that name no message attribute. .* is returned as
// All.
func systemNames(names []string) ([]string, *apiError) {
	out := make([]string, 0, len(names))
	for _, n := range names {
		switch {
		case n == ".*":
			out = append(out, "All")
		case slices.Contains(systemAttributeNames, n):
			out = append(out, n)
		case knownAttr(n):
		default:
			return nil, errInvalidAttributeName.f("unknown message system attribute %s", n)
		}
	}
	return out, nil
}

// lost is the error of a receipt handle h, of lease l, that no longer
// holds its message. On a FIFO queue the handle's lease must be current,
// and the error is SQS's for an expired handle. On a standard queue a
// handle holds its message until another receive takes it, and the error
// is leasehold's own: SQS would answer with a success that deletes
// nothing, or deletes what another consumer holds.
func lost(q *queue, h string, l store.Lease) *apiError {
	if q.fifo {
		return errInvalidParameter.f("Value %s for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.", h)
	}
	return errReceiptHandleIsInvalid.f("the receipt handle no longer holds message %d (fencing token %d): another receive has taken it since, or it was deleted with another handle, dead-lettered or purged", l.MessageID, l.FencingToken)
}

// settleErr turns the error of one settled lease into an SQS error.
func settleErr(q *queue, h string, l store.Lease, err error) error {
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) {
		return lost(q, h, l)
	}
	return err
}

// completion is the completion of a DeleteMessage: on a standard queue a
// late one, fenced by the token alone, so that a handle deletes its
// message after its visibility timeout while no other receive has taken
// the message, and a delete repeated with the same handle succeeds; on a
// FIFO queue the lease must be current.
func completion(q *queue, l store.Lease) store.Completion {
	return store.Completion{Lease: l, Late: !q.fifo}
}

type handleEntry struct {
	Id                string `json:"Id"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

// handleBatch is the input of the batch actions on receipt handles.
type handleBatch struct {
	queueInput
	Entries []handleEntry `json:"Entries"`
}

func (b *handleBatch) entryIDs() []string { return entryIDs(b.Entries) }

func (e handleEntry) entryID() string { return e.Id }

type batchSuccess struct {
	Id string `json:"Id"`
}

// openHandle decodes the input of an action on one receipt handle and
// reads the queue and the lease it names.
func (a *API) openHandle(ctx context.Context, c *call) (handleEntry, *queue, store.Lease, error) {
	var in struct {
		queueInput
		handleEntry
	}
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return in.handleEntry, nil, store.Lease{}, err
	}
	l, aerr := a.receipts.parse(q.name(), in.ReceiptHandle)
	if aerr != nil {
		return in.handleEntry, nil, store.Lease{}, aerr
	}
	return in.handleEntry, q, l, nil
}

func (a *API) deleteMessage(ctx context.Context, c *call) (any, error) {
	in, q, l, err := a.openHandle(ctx, c)
	if err != nil {
		return nil, err
	}
	errs, err := a.completions.do(ctx, []store.Completion{completion(q, l)})
	if err != nil {
		return nil, err
	}
	if errs[0] != nil {
		return nil, settleErr(q, in.ReceiptHandle, l, errs[0])
	}
	return empty{}, nil
}

func (a *API) deleteMessageBatch(ctx context.Context, c *call) (any, error) {
	var in handleBatch
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	out := batchOutput[batchSuccess]{Successful: []batchSuccess{}, Failed: []batchFailure{}}
	var cs []store.Completion
	var entries []handleEntry
	for _, e := range in.Entries {
		l, aerr := a.receipts.parse(q.name(), e.ReceiptHandle)
		if aerr != nil {
			out.Failed = append(out.Failed, failure(e.Id, aerr))
			continue
		}
		cs, entries = append(cs, completion(q, l)), append(entries, e)
	}
	if len(cs) > 0 {
		errs, err := a.completions.do(ctx, cs)
		if err != nil {
			return nil, err
		}
		for i, e := range errs {
			out.add(entries[i].Id, settleErr(q, entries[i].ReceiptHandle, cs[i].Lease, e), batchSuccess{entries[i].Id})
		}
	}
	return out, nil
}

// add records the outcome of one entry of a batch of receipt handles.
func (o *batchOutput[T]) add(id string, err error, ok T) {
	if err == nil {
		o.Successful = append(o.Successful, ok)
		return
	}
	e := fromStore(err)
	if e.cause != nil {
		o.causes = append(o.causes, e.cause)
	}
	o.Failed = append(o.Failed, failure(id, e))
}

// serverCauses are the details of entries that failed on the server's
// side, for the log.
func (o batchOutput[T]) serverCauses() []error { return o.causes }

// visibilityTimeout checks a new visibility timeout.
func visibilityTimeout(v *int) (time.Duration, *apiError) {
	if v == nil {
		return 0, errMissingParameter.f("The request must contain the parameter VisibilityTimeout.")
	}
	if *v < 0 || *v > maxVisibility {
		return 0, errInvalidParameter.f("value %d for parameter VisibilityTimeout is invalid: it must be from 0 to %d", *v, maxVisibility)
	}
	return time.Duration(*v) * time.Second, nil
}

// changeVisibility sets the visibility of the messages of leases, whose
// handles are hs, all to d: zero gives them back at once (the receive
// still counts), more extends their leases to d from now. On a standard
// queue a handle whose visibility timeout has ended still changes its
// message's visibility while no other receive has taken it, as in SQS: a
// late release makes the message visible after d (at once for zero), and
// the handle goes on holding it. It returns one error per lease.
func (a *API) changeVisibility(ctx context.Context, q *queue, hs []string, leases []store.Lease, d time.Duration) ([]error, error) {
	errs := make([]error, len(leases))
	for i, l := range leases {
		if d == 0 {
			errs[i] = a.st.Release(ctx, store.Release{Lease: l})
		} else {
			errs[i] = store.ErrLeaseLost // unless the extension below holds it
		}
	}
	if d > 0 {
		res, err := a.st.Extend(ctx, leases, d)
		if err != nil {
			return nil, err
		}
		for i, l := range leases {
			if !slices.Contains(res.Lost, l) {
				errs[i] = nil
			}
		}
	}
	for i, l := range leases {
		err := errs[i]
		if err == nil {
			continue
		}
		if errors.Is(err, store.ErrLeaseLost) && !q.fifo {
			err = a.st.Release(ctx, store.Release{Lease: l, Delay: d, Late: true})
		}
		if err != nil && !errors.Is(err, store.ErrLeaseLost) && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		errs[i] = nil
		if err != nil {
			if errs[i], err = a.visibilityLost(ctx, q, hs[i], l); err != nil {
				return nil, err
			}
		}
	}
	return errs, nil
}

// visibilityLost is the error of a visibility change whose handle h no
// longer holds its message: SQS's own when the message is gone (deleted,
// dead-lettered, purged), else lost's.
func (a *API) visibilityLost(ctx context.Context, q *queue, h string, l store.Lease) (*apiError, error) {
	m, err := a.st.Get(ctx, l.MessageID)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && (m.Queue != q.name() || m.State >= store.Completed):
		return errInvalidParameter.f("Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", h), nil
	case err != nil:
		return nil, err
	}
	return lost(q, h, l), nil
}

func (a *API) changeMessageVisibility(ctx context.Context, c *call) (any, error) {
	in, q, l, err := a.openHandle(ctx, c)
	if err != nil {
		return nil, err
	}
	d, aerr := visibilityTimeout(in.VisibilityTimeout)
	if aerr != nil {
		return nil, aerr
	}
	errs, err := a.changeVisibility(ctx, q, []string{in.ReceiptHandle}, []store.Lease{l}, d)
	if err != nil {
		return nil, err
	}
	if errs[0] != nil {
		return nil, errs[0]
	}
	return empty{}, nil
}

func (a *API) changeMessageVisibilityBatch(ctx context.Context, c *call) (any, error) {
	var in handleBatch
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	out := batchOutput[batchSuccess]{Successful: []batchSuccess{}, Failed: []batchFailure{}}
	// Entries with the same timeout are extended in one store call.
	byTimeout := map[time.Duration][]int{}
	leases := make([]store.Lease, len(in.Entries))
	for i, e := range in.Entries {
		l, aerr := a.receipts.parse(q.name(), e.ReceiptHandle)
		if aerr == nil {
			var d time.Duration
			if d, aerr = visibilityTimeout(e.VisibilityTimeout); aerr == nil {
				leases[i] = l
				byTimeout[d] = append(byTimeout[d], i)
				continue
			}
		}
		out.Failed = append(out.Failed, failure(e.Id, aerr))
	}
	for d, idx := range byTimeout {
		ls, hs := make([]store.Lease, len(idx)), make([]string, len(idx))
		for j, i := range idx {
			ls[j], hs[j] = leases[i], in.Entries[i].ReceiptHandle
		}
		errs, err := a.changeVisibility(ctx, q, hs, ls, d)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out.add(in.Entries[i].Id, errs[j], batchSuccess{in.Entries[i].Id})
		}
	}
	return out, nil
}
