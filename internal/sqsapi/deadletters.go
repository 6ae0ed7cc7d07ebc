package sqsapi

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/store"
)

// This file holds dead-letter queues: a redrive policy's
// deadLetterTargetArn, which a message sent to the queue carries to the
// store (store.NewMessage.DeadLetterQueue), so that the store moves it
// there when it dies, whatever kills it: the reaper, a release on its last
// receive, or the receive-time check of a policy set or lowered after it
// was sent (a queue deleted since takes nothing: the message stays dead
// where it is); and ListDeadLetterSourceQueues.

// errResourceNotFound is the error of the message move task actions for
// a queue or task that does not exist: HTTP 404, as from Amazon SQS.
var errResourceNotFound = errorKind{404, "ResourceNotFoundException", "ResourceNotFoundException"}

// internalPrefix marks the attributes of a queue's record that this API
// keeps for itself: never shown, never set by a request.
const internalPrefix = "leasehold:"

// sourcePrefix marks, in a dead-letter queue's record, a queue whose
// redrive policy named it: sourcePrefix+name. It is written before the
// policy and never removed, so that a source is never missing from it;
// ListDeadLetterSourceQueues checks each one's policy as it lists it, so
// one that no longer names the queue is passed over.
const sourcePrefix = internalPrefix + "source:"

// redriveTarget reads the name of a redrive policy's dead-letter queue:
// empty when the policy names none, and messages die in their own queue.
// The ARN must be of this server's account, in any region.
func (a *API) redriveTarget(policy string) (string, *apiError) {
	var p struct {
		Target *string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil || p.Target == nil {
		return "", nil // parseRedrive reports what is wrong with the policy
	}
	name, ok := a.arnName(*p.Target)
	if !ok {
		return "", errInvalidAttributeValue.f("invalid value for the parameter RedrivePolicy: deadLetterTargetArn %q is not the ARN of a queue of this server (arn:aws:sqs:<region>:%s:<name>)",
			*p.Target, a.cfg.AccountID)
	}
	return name, nil
}

// arnName reads the queue name of an ARN of this server's account, in
// any region: regions name no queues of their own (see queueARN).
func (a *API) arnName(arn string) (string, bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "sqs" || parts[4] != a.cfg.AccountID {
		return "", false
	}
	name := parts[5]
	if checkQueueName(name, isFifoName(name)) != nil {
		return "", false
	}
	return name, true
}

// linkDeadLetterQueue checks the dead-letter queue that attrs' redrive
// policy names for queue name, if any, and records name as its source,
// before the policy is set: the target must exist, and be FIFO exactly
// when the queue is.
func (a *API) linkDeadLetterQueue(ctx context.Context, name string, fifo bool, attrs map[string]string) error {
	policy, ok := attrs[attrRedrive]
	if !ok || policy == "" {
		return nil
	}
	target, aerr := a.redriveTarget(policy)
	if aerr != nil || target == "" {
		return asError(aerr)
	}
	// The target may be the queue itself, as in SQS (see newQueue).
	if _, err := a.lookup(ctx, nameURL(target)); missingQueue(err) {
		return errInvalidAttributeValue.f("invalid value for the parameter RedrivePolicy: dead-letter target %s does not exist", target)
	} else if err != nil {
		return err
	}
	if isFifoName(target) != fifo {
		return errInvalidAttributeValue.f("invalid value for the parameter RedrivePolicy: the dead-letter queue of a FIFO queue must be a FIFO queue, and of a standard queue a standard queue")
	}
	_, err := a.st.SetQueueAttributes(ctx, target, map[string]string{sourcePrefix + name: "1"})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errInvalidAttributeValue.f("invalid value for the parameter RedrivePolicy: dead-letter target %s does not exist", target)
	case errors.Is(err, store.ErrInvalid):
		return errInvalidAttributeValue.f("invalid value for the parameter RedrivePolicy: %s has as many source queues as its record holds", target)
	}
	return err
}

// policyTarget reads the queue name of a checked redrive policy's
// deadLetterTargetArn: what follows its last colon; empty for none.
func policyTarget(policy string) string {
	var p struct {
		Target string `json:"deadLetterTargetArn"`
	}
	if json.Unmarshal([]byte(policy), &p) != nil {
		return ""
	}
	return p.Target[strings.LastIndexByte(p.Target, ':')+1:]
}

// missingQueue reports whether err is lookup's error for a queue that
// does not exist.
func missingQueue(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.code == errQueueDoesNotExist.code
}

// asError returns e as an error: nil when e is nil.
func asError(e *apiError) error {
	if e == nil {
		return nil
	}
	return e
}

// deadLetterSources lists, sorted, the queues after after whose redrive
// policy names dlq as their dead-letter queue now, at most limit of them
// (limit+1 to tell whether more follow). It reads dlq's record and the
// record of each queue listed there, up to what the page needs.
func (a *API) deadLetterSources(ctx context.Context, dlq, after string, limit int) ([]string, error) {
	rec, err := a.st.QueueInfo(ctx, dlq)
	if err != nil {
		return nil, asMissingQueue(err, dlq)
	}
	var names []string
	for k := range rec.Attributes {
		if n, ok := strings.CutPrefix(k, sourcePrefix); ok && n > after {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		if len(out) == limit {
			break
		}
		src, err := a.st.QueueInfo(ctx, n)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if t, _ := a.redriveTarget(src.Attributes[attrRedrive]); t == dlq {
			out = append(out, n)
		}
	}
	return out, nil
}

func (a *API) listDeadLetterSourceQueues(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		MaxResults *int   `json:"MaxResults"`
		NextToken  string `json:"NextToken"`
	}
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	limit, after, err := queuePaging(in.MaxResults, in.NextToken)
	if err != nil {
		return nil, err
	}
	names, err := a.deadLetterSources(ctx, q.name(), after, limit+1)
	if err != nil {
		return nil, err
	}
	var out struct {
		QueueUrls []string `json:"queueUrls"`
		NextToken string   `json:"NextToken,omitempty"`
	}
	out.QueueUrls = []string{}
	for i, n := range names {
		if i == limit {
			if in.MaxResults != nil {
				out.NextToken = pageToken(names[i-1])
			}
			break
		}
		out.QueueUrls = append(out.QueueUrls, a.queueURL(c.r, n))
	}
	return out, nil
}
