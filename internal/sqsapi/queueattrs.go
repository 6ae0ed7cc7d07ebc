package sqsapi

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/store"
)

// The queue attributes that change what the API does, with SQS's
// defaults. A queue's record keeps those that were set.
const (
	attrDelay        = "DelaySeconds"
	attrMaxSize      = "MaximumMessageSize"
	attrRetention    = "MessageRetentionPeriod"
	attrWait         = "ReceiveMessageWaitTimeSeconds"
	attrVisibility   = "VisibilityTimeout"
	attrRedrive      = "RedrivePolicy"
	attrFifo         = "FifoQueue"
	attrContentDedup = "ContentBasedDeduplication"
	attrDedupScope   = "DeduplicationScope"
	attrThroughput   = "FifoThroughputLimit"
	attrManagedSSE   = "SqsManagedSseEnabled"
	attrKmsKey       = "KmsMasterKeyId"
	attrKmsReuse     = "KmsDataKeyReusePeriodSeconds"
	attrPolicy       = "Policy"
)

// booleans are the attributes whose values are true or false, in any
// case as SQS takes them; they are kept in lower case.
var booleans = map[string]bool{attrFifo: true, attrContentDedup: true, attrManagedSSE: true}

// fifoOnly are the attributes of FIFO queues alone, with the values each
// takes; a standard queue knows none of them, as in SQS.
var fifoOnly = map[string][]string{
	attrContentDedup: {"true", "false"},
	attrDedupScope:   {"messageGroup", "queue"},
	attrThroughput:   {"perQueue", "perMessageGroupId"},
}

// fifoDefaults are the values a FIFO queue shows of the attributes of
// FIFO queues until they are set.
var fifoDefaults = map[string]string{attrContentDedup: "false", attrDedupScope: "queue", attrThroughput: "perQueue"}

// dedupScopeKey keeps, in a FIFO queue's record, the DeduplicationScope
// the queue was created with, which is the one its sends deduplicate
// by: Amazon SQS shows a DeduplicationScope set later but goes on
// deduplicating as the queue was created. A queue whose record lacks it
// (created by an earlier version, or by a Go program) deduplicates by
// its DeduplicationScope until that is first changed, when the scope it
// had is kept here.
const dedupScopeKey = internalPrefix + "dedupScope"

// dedupScope is the DeduplicationScope a FIFO queue's sends deduplicate
// by: the one it was created with (see dedupScopeKey).
func dedupScope(attrs map[string]string) string {
	return cmp.Or(attrs[dedupScopeKey], attrs[attrDedupScope], fifoDefaults[attrDedupScope])
}

// maxMessageSize is the largest message SQS takes, and the largest
// MaximumMessageSize: 1 MiB.
const maxMessageSize = 1 << 20

// defaults are the values of the settable attributes a queue has until
// they are set.
var defaults = map[string]string{
	attrDelay:      "0",
	attrMaxSize:    strconv.Itoa(maxMessageSize),
	attrRetention:  "345600",
	attrWait:       "0",
	attrVisibility: "30",
	// Queues are encrypted at rest with keys SQS manages unless told
	// otherwise, as in SQS.
	attrManagedSSE: "true",
}

// kept are attributes that are stored and given back but change nothing
// here (encryption, access policies, FIFO throughput modes).
var kept = map[string]bool{
	attrPolicy: true, attrKmsKey: true, attrKmsReuse: true, attrManagedSSE: true,
	"RedriveAllowPolicy": true, attrDedupScope: true, attrThroughput: true,
}

// computed are the attributes read from the queue's state, never set.
var computed = map[string]bool{
	"ApproximateNumberOfMessages": true, "ApproximateNumberOfMessagesNotVisible": true,
	"ApproximateNumberOfMessagesDelayed": true, "CreatedTimestamp": true, "LastModifiedTimestamp": true, "QueueArn": true,
}

// ranges bound the numeric attributes, in seconds or bytes.
var ranges = map[string][2]int{
	attrDelay:      {0, 900},
	attrMaxSize:    {1024, maxMessageSize},
	attrRetention:  {60, 1_209_600},
	attrWait:       {0, 20},
	attrVisibility: {0, maxVisibility},
}

// knownAttr reports whether name is a queue attribute this API knows:
// one it acts on, keeps or computes.
func knownAttr(name string) bool {
	_, numeric := ranges[name]
	_, fifo := fifoOnly[name]
	return numeric || name == attrRedrive || name == attrFifo || fifo || kept[name] || computed[name]
}

// maxVisibility is the longest visibility timeout, in seconds: 12 hours.
const maxVisibility = 43_200

// onlyNameChars reports whether s holds only ASCII letters, digits, '_',
// '-' and the characters of extra: the alphabet of SQS's names and ids.
func onlyNameChars(s, extra string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || strings.ContainsRune(extra, c)) {
			return false
		}
	}
	return true
}

// maxReceiveCountLimit bounds a redrive policy's maxReceiveCount, as SQS
// does.
const maxReceiveCountLimit = 1000

// normalAttrs returns attrs with the values of boolean attributes in
// lower case, as they are kept and compared: SQS takes "True" and "TRUE"
// as true.
func normalAttrs(attrs map[string]string) map[string]string {
	out := make(map[string]string, len(attrs))
	for k, v := range attrs {
		if booleans[k] && (strings.EqualFold(v, "true") || strings.EqualFold(v, "false")) {
			v = strings.ToLower(v)
		}
		out[k] = v
	}
	return out
}

// checkSetAttrs checks attributes given to CreateQueue or
// SetQueueAttributes (normalAttrs) for a queue that is (or is to be)
// FIFO or not. As in SQS, a standard queue knows no FifoQueue, not even
// false; a FIFO queue's FifoQueue true changes nothing, and false is
// refused, since a queue's type is fixed when it is created.
func checkSetAttrs(attrs map[string]string, fifo bool) *apiError {
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[name]
		switch {
		case name == attrFifo && !fifo:
			return errInvalidAttributeName.f("Unknown Attribute FifoQueue.")
		case name == attrFifo && v == "false":
			return errInvalidAttributeValue.f("Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.")
		}
		if values, ok := fifoOnly[name]; ok {
			switch {
			case !fifo && name == attrContentDedup:
				return errInvalidAttributeName.f("Unknown Attribute %s.", name)
			case !fifo:
				return errInvalidAttributeName.f("You can specify the %s only when FifoQueue is set to true.", name)
			case !slices.Contains(values, v):
				return errInvalidAttributeValue.f("Invalid value for the parameter %s: %q is not one of %s.", name, v, strings.Join(values, ", "))
			}
			continue
		}
		switch {
		case ranges[name] != [2]int{}:
			r := ranges[name]
			n, err := strconv.Atoi(v)
			if err != nil || n < r[0] || n > r[1] {
				return errInvalidAttributeValue.f("Invalid value for the parameter %s: %q is not an integer from %d to %d.", name, v, r[0], r[1])
			}
		case name == attrRedrive:
			if v == "" {
				continue
			}
			if _, err := parseRedrive(v); err != nil {
				return err
			}
		case booleans[name]:
			if v != "true" && v != "false" {
				return errInvalidAttributeValue.f("Invalid value for the parameter %s: %q is not true or false.", name, v)
			}
		case name == attrPolicy:
			if _, err := parsePolicy(v); err != nil {
				return err
			}
		case kept[name]:
		case computed[name]:
			return errInvalidAttributeName.f("%s is read-only", name)
		default:
			return errInvalidAttributeName.f("Unknown Attribute %s.", name)
		}
	}
	if attrs[attrKmsKey] != "" && attrs[attrManagedSSE] == "true" {
		return errInvalidAttributeName.f("You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE.")
	}
	if attrs[attrThroughput] == "perMessageGroupId" && attrs[attrDedupScope] == "queue" {
		return errInvalidAttributeValue.f("Invalid value for the parameter FifoThroughputLimit: perMessageGroupId needs a DeduplicationScope of messageGroup.")
	}
	return nil
}

// withEncryption returns attrs, checked, to be kept for a queue: a KMS
// key set turns SQS-managed encryption off, as in SQS, which encrypts
// with one or the other.
func withEncryption(attrs map[string]string) map[string]string {
	if attrs[attrKmsKey] != "" {
		attrs[attrManagedSSE] = "false"
	}
	return attrs
}

// parseRedrive reads a redrive policy's maxReceiveCount. Its
// deadLetterTargetArn, optional here, is read by redriveTarget.
func parseRedrive(v string) (int, *apiError) {
	var p map[string]any
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return 0, errInvalidAttributeValue.f("invalid value for the parameter RedrivePolicy: it is not a JSON object: %v", err)
	}
	var n int
	var err error
	switch c := p["maxReceiveCount"].(type) {
	case string:
		n, err = strconv.Atoi(c)
	case float64:
		n = int(c)
		if float64(n) != c {
			err = strconv.ErrSyntax
		}
	default:
		err = strconv.ErrSyntax
	}
	if err != nil || n < 1 || n > maxReceiveCountLimit {
		return 0, errInvalidAttributeValue.f("invalid value for the parameter RedrivePolicy: maxReceiveCount must be an integer from 1 to %d", maxReceiveCountLimit)
	}
	return n, nil
}

// queue is what a request needs of a queue: its record and the settings
// read from it.
type queue struct {
	rec          store.QueueInfo
	fifo         bool
	contentDedup bool
	// dedupByGroup is a DeduplicationScope of messageGroup when the
	// queue was created (see dedupScopeKey): a deduplication id holds
	// within its message group alone.
	dedupByGroup bool
	delay        time.Duration
	maxSize      int
	wait         time.Duration
	visibility   time.Duration
	// maxReceive is the redrive policy's maxReceiveCount; zero when the
	// queue has none, and its messages are received without limit.
	maxReceive int
	// deadLetterQueue is the name of the redrive policy's dead-letter
	// queue; empty when it names none or this queue, and dead messages
	// stay here.
	deadLetterQueue string
}

func (q *queue) name() string { return q.rec.Queue }

// newQueue reads a queue's settings from its record, which checkSetAttrs
// has checked.
func newQueue(rec store.QueueInfo) *queue {
	q := &queue{rec: rec, fifo: isFifoName(rec.Queue), contentDedup: strings.EqualFold(rec.Attributes[attrContentDedup], "true"),
		dedupByGroup: dedupScope(rec.Attributes) == "messageGroup"}
	num := func(name string) int {
		n, err := strconv.Atoi(rec.Attributes[name])
		if err != nil {
			n, _ = strconv.Atoi(defaults[name])
		}
		return n
	}
	q.delay = time.Duration(num(attrDelay)) * time.Second
	q.maxSize = num(attrMaxSize)
	q.wait = time.Duration(num(attrWait)) * time.Second
	q.visibility = time.Duration(num(attrVisibility)) * time.Second
	if p := rec.Attributes[attrRedrive]; p != "" {
		q.maxReceive, _ = parseRedrive(p)
		// A policy that names the queue itself, as SQS allows, moves
		// nothing: its dead letters stay dead where they are.
		if t := policyTarget(p); t != rec.Queue {
			q.deadLetterQueue = t
		}
	}
	return q
}

// maxDeliveries is the delivery budget of a message sent to the queue:
// the redrive policy's maxReceiveCount, or no limit to speak of.
func (q *queue) maxDeliveries() int {
	if q.maxReceive > 0 {
		return q.maxReceive
	}
	return store.MaxDeliveriesLimit
}

func isFifoName(name string) bool { return strings.HasSuffix(name, ".fifo") }

// checkQueueName applies SQS's rules to the name of a queue to create: 1
// to 80 letters, digits, hyphens and underscores, with .fifo after them
// exactly when the queue is FIFO (FifoQueue true): a standard queue's
// name holds no period.
func checkQueueName(name string, fifo bool) *apiError {
	if fifo {
		base, ok := strings.CutSuffix(name, ".fifo")
		if !ok || base == "" || len(name) > 80 || !onlyNameChars(base, "") {
			return errInvalidParameter.f("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length: %q does not.", name)
		}
		return nil
	}
	if name == "" || len(name) > 80 || !onlyNameChars(name, "") {
		return errInvalidParameter.f("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length: %q does not (a FIFO queue's name ends in .fifo, with FifoQueue set to true).", name)
	}
	return nil
}

// queueAttributes are the attributes GetQueueAttributes gives for names
// ("All" for every one).
func (a *API) queueAttributes(q *queue, st store.Stats, arn string, names []string) (map[string]string, *apiError) {
	all := map[string]string{
		"ApproximateNumberOfMessages":           strconv.FormatInt(st.Pending-st.Delayed+st.Waiting, 10),
		"ApproximateNumberOfMessagesNotVisible": strconv.FormatInt(st.Processing, 10),
		"ApproximateNumberOfMessagesDelayed":    strconv.FormatInt(st.Delayed, 10),
		"CreatedTimestamp":                      strconv.FormatInt(q.rec.CreatedAt.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(q.rec.UpdatedAt.Unix(), 10),
		"QueueArn":                              arn,
	}
	for k, v := range defaults {
		all[k] = v
	}
	for k, v := range q.rec.Attributes {
		if !isTagKey(k) && !strings.HasPrefix(k, internalPrefix) {
			all[k] = v
		}
	}
	if all[attrKmsKey] == "" {
		// The data key's reuse period is a KMS key's: without one, it is
		// not shown, as in SQS.
		delete(all, attrKmsReuse)
	}
	if q.fifo {
		for k, v := range fifoDefaults {
			all[k] = cmp.Or(q.rec.Attributes[k], v)
		}
		all[attrFifo] = "true"
		all[attrContentDedup] = strconv.FormatBool(q.contentDedup)
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			return all, nil
		}
		if v, ok := all[n]; ok {
			out[n] = v
			continue
		}
		if !knownAttr(n) {
			return nil, errInvalidAttributeName.f("Unknown Attribute %s.", n)
		}
	}
	return out, nil
}
