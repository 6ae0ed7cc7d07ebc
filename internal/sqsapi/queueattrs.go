package sqsapi

import (
	"encoding/json"
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
)

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
}

// kept are attributes that are stored and given back but change nothing
// here (encryption, access policies, FIFO throughput modes).
var kept = map[string]bool{
	"Policy": true, "KmsMasterKeyId": true, "KmsDataKeyReusePeriodSeconds": true, "SqsManagedSseEnabled": true,
	"RedriveAllowPolicy": true, "DeduplicationScope": true, "FifoThroughputLimit": true,
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
	return numeric || name == attrRedrive || name == attrFifo || name == attrContentDedup || kept[name] || computed[name]
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

// checkSetAttrs checks attributes given to CreateQueue or
// SetQueueAttributes for a queue that is (or is to be) FIFO or not.
func checkSetAttrs(attrs map[string]string, fifo, creating bool) *apiError {
	for name, v := range attrs {
		switch {
		case ranges[name] != [2]int{}:
			r := ranges[name]
			n, err := strconv.Atoi(v)
			if err != nil || n < r[0] || n > r[1] {
				return errInvalidAttributeValue.f("invalid value for the parameter %s: %q is not an integer from %d to %d", name, v, r[0], r[1])
			}
		case name == attrRedrive:
			if v == "" {
				continue
			}
			if _, err := parseRedrive(v); err != nil {
				return err
			}
		case name == attrFifo:
			if !creating {
				return errInvalidAttributeName.f("FifoQueue can only be set when the queue is created")
			}
			if v != "true" && v != "false" {
				return errInvalidAttributeValue.f("invalid value for the parameter FifoQueue: %q is not true or false", v)
			}
			if (v == "true") != fifo {
				return errInvalidAttributeValue.f("a queue is FIFO exactly when its name ends in .fifo")
			}
		case name == attrContentDedup:
			if v != "true" && v != "false" {
				return errInvalidAttributeValue.f("invalid value for the parameter ContentBasedDeduplication: %q is not true or false", v)
			}
			if !fifo {
				return errInvalidAttributeName.f("ContentBasedDeduplication is an attribute of FIFO queues only")
			}
		case kept[name]:
		case computed[name]:
			return errInvalidAttributeName.f("%s is read-only", name)
		default:
			return errInvalidAttributeName.f("unknown attribute %s", name)
		}
	}
	return nil
}

// parseRedrive reads a redrive policy's maxReceiveCount. The dead-letter
// target is kept as given: dead messages stay in their own queue, in the
// dead state.
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
	delay        time.Duration
	maxSize      int
	wait         time.Duration
	visibility   time.Duration
	// maxReceive is the redrive policy's maxReceiveCount; zero when the
	// queue has none, and its messages are received without limit.
	maxReceive int
}

func (q *queue) name() string { return q.rec.Queue }

// newQueue reads a queue's settings from its record, which checkSetAttrs
// has checked.
func newQueue(rec store.QueueInfo) *queue {
	q := &queue{rec: rec, fifo: isFifoName(rec.Queue), contentDedup: rec.Attributes[attrContentDedup] == "true"}
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
// to 80 letters, digits, hyphens and underscores, with .fifo after them for
// a FIFO queue.
func checkQueueName(name string) *apiError {
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" || len(name) > 80 {
		return errInvalidParameter.f("queue name %q must be 1 to 80 characters", name)
	}
	if !onlyNameChars(base, "") {
		return errInvalidParameter.f("queue name %q can only include alphanumeric characters, hyphens or underscores, and .fifo at the end", name)
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
		if !strings.HasPrefix(k, tagPrefix) {
			all[k] = v
		}
	}
	if q.fifo {
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
			return nil, errInvalidAttributeName.f("unknown attribute %s", n)
		}
	}
	return out, nil
}
