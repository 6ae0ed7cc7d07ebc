package sqsapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/store"
)

// unsetValues are what SQS takes an attribute that a queue does not show
// to be, when CreateQueue compares a queue with the one it would make.
var unsetValues = map[string]string{attrFifo: "false", attrContentDedup: "false", attrKmsReuse: "300"}

// A queue's tags are kept among the attributes of its record, each under
// tagPrefix and its key, its value after a '=' so that an empty value is
// kept too (the store keeps no empty attribute). Tags kept before that,
// under legacyTagPrefix and as they were, are read too.
const (
	tagPrefix       = "tagv:"
	legacyTagPrefix = "tag:"
)

// tagKey is the attribute that keeps the tag of key k.
func tagKey(k string) string { return tagPrefix + k }

// tagValue is how a tag's value v is kept.
func tagValue(v string) string { return "=" + v }

// isTagKey reports whether an attribute of a queue's record keeps a tag.
func isTagKey(k string) bool {
	return strings.HasPrefix(k, tagPrefix) || strings.HasPrefix(k, legacyTagPrefix)
}

// queueTags reads a queue's tags from the attributes of its record.
func queueTags(attrs map[string]string) map[string]string {
	tags := map[string]string{}
	for k, v := range attrs {
		if t, ok := strings.CutPrefix(k, legacyTagPrefix); ok {
			if _, newer := attrs[tagKey(t)]; !newer {
				tags[t] = v
			}
		} else if t, ok := strings.CutPrefix(k, tagPrefix); ok {
			tags[t] = strings.TrimPrefix(v, "=")
		}
	}
	return tags
}

// empty is the output of actions that return nothing.
type empty struct{}

type queueURLOutput struct {
	QueueUrl string `json:"QueueUrl"`
}

func (a *API) createQueue(ctx context.Context, c *call) (any, error) {
	var in struct {
		QueueName  string            `json:"QueueName"`
		Attributes map[string]string `json:"Attributes"`
		Tags       map[string]string `json:"tags"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	given := normalAttrs(in.Attributes)
	// A queue is FIFO when FifoQueue says so, and then only its name
	// ends in .fifo, as in SQS.
	fifo := given[attrFifo] == "true"
	if err := checkQueueName(in.QueueName, fifo); err != nil {
		return nil, err
	}
	if err := checkSetAttrs(given, fifo); err != nil {
		return nil, err
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	if err := a.linkDeadLetterQueue(ctx, in.QueueName, fifo, given); err != nil {
		return nil, err
	}
	attrs := map[string]string{}
	for k, v := range given {
		if v != "" && !(k == attrFifo && !fifo) {
			attrs[k] = v
		}
	}
	for k, v := range in.Tags {
		attrs[tagKey(k)] = tagValue(v)
	}
	if fifo {
		attrs[dedupScopeKey] = dedupScope(attrs)
	}
	rec, created, err := a.create(ctx, in.QueueName, withEncryption(attrs))
	if err != nil {
		return nil, err
	}
	q := a.remember(rec, a.clk.Monotonic())
	if !created {
		have, _ := a.queueAttributes(q, store.Stats{}, "", []string{"All"})
		for k, v := range given {
			had := cmp.Or(have[k], unsetValues[k])
			if v != had && !(v == "" && had == defaults[k]) {
				return nil, errQueueNameExists.f("A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
	}
	return queueURLOutput{a.queueURL(c.r, in.QueueName)}, nil
}

// create creates a queue, unless it would be one more than MaxQueues.
// A queue that exists is not counted: CreateQueue returns it, or makes
// the record of one that holds messages. The count of the queues is read
// from the store (one listing of every queue) at most once a CacheTTL,
// and kept up to date in between by this server's creates and deletes,
// so that creating many queues costs one listing a CacheTTL, not one
// each.
func (a *API) create(ctx context.Context, name string, attrs map[string]string) (store.QueueInfo, bool, error) {
	if rec, err := a.st.QueueInfo(ctx, name); err == nil {
		return rec, false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.QueueInfo{}, false, err
	}
	if err := a.creating.lock(ctx); err != nil {
		return store.QueueInfo{}, false, err
	}
	defer a.creating.unlock()
	// Another create of the same name may have made it while this one
	// waited: it is returned, not counted again.
	if rec, err := a.st.QueueInfo(ctx, name); err == nil {
		return rec, false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.QueueInfo{}, false, err
	}
	if at, ok := a.deleted[name]; ok && a.clk.Monotonic()-at < cooldown {
		return store.QueueInfo{}, false, errQueueDeletedRecently.f("You must wait 60 seconds after deleting a queue before you can create another with the same name.")
	}
	if now := a.clk.Monotonic(); !a.counted || now-a.countedAt >= a.cfg.CacheTTL {
		names, err := a.st.Queues(ctx)
		if err != nil {
			return store.QueueInfo{}, false, err
		}
		a.queues, a.counted, a.countedAt = len(names), true, now
	}
	// A queue that holds messages is one already: its record makes no
	// new queue.
	held, err := a.holds(ctx, name)
	if err != nil {
		return store.QueueInfo{}, false, err
	}
	if !held && a.queues >= a.cfg.MaxQueues {
		return store.QueueInfo{}, false, errOverLimit.f("the server holds %d queues, its limit: delete a queue first", a.queues)
	}
	rec, created, err := a.st.CreateQueue(ctx, name, attrs)
	if created && !held {
		a.queues++
	}
	return rec, created, err
}

// remove deletes a queue and takes it off the count that create keeps
// when there was one to delete: a record, messages or a pause. Deletes
// and creates take turns, so that of two deletes of one queue only the
// first counts.
func (a *API) remove(ctx context.Context, name string) error {
	if err := a.creating.lock(ctx); err != nil {
		return err
	}
	defer a.creating.unlock()
	_, err := a.st.QueueInfo(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	existed := err == nil
	if !existed {
		if existed, err = a.holds(ctx, name); err != nil {
			return err
		}
	}
	if _, err := a.st.DeleteQueue(ctx, name); err != nil {
		return err
	}
	if existed {
		a.queues = max(a.queues-1, 0)
		a.tombstone(name)
	}
	return nil
}

// cooldown is how long after a queue's deletion its name cannot be
// created again, and after a purge the queue cannot be purged again, as
// in SQS.
const cooldown = 60 * time.Second

// tombstone records that this server deleted queue name now, so that
// CreateQueue refuses the name for the cooldown, and forgets the names
// deleted longer ago. Callers hold creating.
func (a *API) tombstone(name string) {
	now := a.clk.Monotonic()
	for n, at := range a.deleted {
		if now-at >= cooldown {
			delete(a.deleted, n)
		}
	}
	a.deleted[name] = now
}

// countLock serialises the creates and deletes of queues, which read and
// keep the count of queues across store calls. A request gives up waiting
// when its context ends. The zero value is unlocked.
type countLock struct {
	init sync.Once
	slot chan struct{}
}

func (l *countLock) lock(ctx context.Context) error {
	l.init.Do(func() { l.slot = make(chan struct{}, 1) })
	select {
	case l.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errUnavailable.f("another create or delete of a queue took longer than this request could wait; retry later").retryIn(time.Second)
	}
}

func (l *countLock) unlock() { <-l.slot }

func (a *API) getQueueURL(ctx context.Context, c *call) (any, error) {
	var in struct {
		QueueName string `json:"QueueName"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.QueueName == "" {
		return nil, errMissingParameter.f("The request must contain the parameter QueueName.")
	}
	if _, err := a.lookup(ctx, nameURL(in.QueueName)); err != nil {
		return nil, err
	}
	return queueURLOutput{a.queueURL(c.r, in.QueueName)}, nil
}

// nameURL makes a name into the form lookup reads: a path whose last
// segment is the escaped name.
func nameURL(name string) string { return "/" + url.PathEscape(name) }

func (a *API) listQueues(ctx context.Context, c *call) (any, error) {
	var in struct {
		QueueNamePrefix string `json:"QueueNamePrefix"`
		MaxResults      *int   `json:"MaxResults"`
		NextToken       string `json:"NextToken"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	limit, after, err := queuePaging(in.MaxResults, in.NextToken)
	if err != nil {
		return nil, err
	}
	// Without a prefix, the page is read alone, with one more name to
	// tell whether more follow; a prefix filters the list of every queue.
	var names []string
	if in.QueueNamePrefix == "" {
		names, err = a.st.QueuePage(ctx, after, "", limit+1)
	} else {
		names, err = a.st.Queues(ctx)
		// Paged by byte order, which the token's comparison below uses:
		// the store's order is its database's collation, which may differ.
		slices.Sort(names)
	}
	if err != nil {
		return nil, err
	}
	// No queues: no QueueUrls, as SQS's JSON protocol leaves an empty
	// list out.
	var out struct {
		QueueUrls []string `json:"QueueUrls,omitempty"`
		NextToken string   `json:"NextToken,omitempty"`
	}
	last := ""
	for _, n := range names {
		if in.QueueNamePrefix != "" && (n <= after || !strings.HasPrefix(n, in.QueueNamePrefix)) {
			continue
		}
		if len(out.QueueUrls) == limit {
			if in.MaxResults != nil {
				out.NextToken = pageToken(last)
			}
			break
		}
		out.QueueUrls = append(out.QueueUrls, a.queueURL(c.r, n))
		last = n
	}
	return out, nil
}

// queuePaging reads the paging of a list of queues: MaxResults, 1 to
// 1000 (1000 when not given), and the name after which the page starts,
// from NextToken.
func queuePaging(maxResults *int, nextToken string) (int, string, error) {
	limit := 1000
	if maxResults != nil {
		if *maxResults < 1 || *maxResults > 1000 {
			return 0, "", errInvalidParameter.f("MaxResults must be from 1 to 1000, not %d", *maxResults)
		}
		limit = *maxResults
	}
	if nextToken == "" {
		return limit, "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(nextToken)
	// A token names the last queue of its page: a name this server could
	// have given.
	if err != nil || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 || len(b) > store.MaxNameLength {
		return 0, "", errInvalidParameter.f("NextToken %q is not a token this server gave", nextToken)
	}
	return limit, string(b), nil
}

// pageToken is the NextToken of a page of queues that ends with last.
func pageToken(last string) string { return base64.RawURLEncoding.EncodeToString([]byte(last)) }

// queueInput names the queue of an action; alone, it is the input of the
// actions that take only a queue.
type queueInput struct {
	QueueUrl string `json:"QueueUrl"`
}

func (in *queueInput) queueURL() string { return in.QueueUrl }

// queueRequest is the input of an action on one queue.
type queueRequest interface{ queueURL() string }

// batchRequest is the input of a batch action.
type batchRequest interface{ entryIDs() []string }

// open decodes the input of an action on one queue into in, checks the
// ids of a batch's entries, and finds the queue.
func (a *API) open(ctx context.Context, c *call, in queueRequest) (*queue, error) {
	if err := c.decode(in); err != nil {
		return nil, err
	}
	if b, ok := in.(batchRequest); ok {
		if err := checkBatchIDs(b.entryIDs()); err != nil {
			return nil, err
		}
	}
	return a.lookup(ctx, in.queueURL())
}

func (a *API) deleteQueue(ctx context.Context, c *call) (any, error) {
	var in queueInput
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	a.forget(q.name())
	if err := a.remove(ctx, q.name()); err != nil {
		return nil, err
	}
	return empty{}, nil
}

func (a *API) purgeQueue(ctx context.Context, c *call) (any, error) {
	var in queueInput
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	if err := a.notePurge(ctx, q.name()); err != nil {
		return nil, err
	}
	if _, err := a.st.PurgeQueue(ctx, q.name()); err != nil {
		return nil, err
	}
	return empty{}, nil
}

// purgedAtKey keeps, in a queue's record, when it was last purged: the
// Unix time in milliseconds, on the server's clock.
const purgedAtKey = internalPrefix + "purgedAt"

// notePurge records in the queue's record that it is purged now, unless
// it was within the cooldown: then PurgeQueueInProgress, as in SQS. The
// time is in the record, so that every server of the database, and one
// restarted, keeps to it; a server checks and records one purge at a
// time.
func (a *API) notePurge(ctx context.Context, name string) error {
	a.purges.Lock()
	defer a.purges.Unlock()
	rec, err := a.st.QueueInfo(ctx, name)
	if err != nil {
		return asMissingQueue(err, name)
	}
	now := a.clk.Now().UnixMilli()
	if last, err := strconv.ParseInt(rec.Attributes[purgedAtKey], 10, 64); err == nil && now-last < cooldown.Milliseconds() {
		return errPurgeInProgress.f("Only one PurgeQueue operation on %s is allowed every 60 seconds.", name)
	}
	_, err = a.setAttrs(ctx, name, map[string]string{purgedAtKey: strconv.FormatInt(now, 10)})
	return err
}

func (a *API) getQueueAttributes(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		AttributeNames []string `json:"AttributeNames"`
	}
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	var st store.Stats
	for _, n := range in.AttributeNames {
		if n == "All" || strings.HasPrefix(n, "ApproximateNumberOfMessages") {
			if st, err = a.st.Stats(ctx, q.name()); err != nil {
				return nil, err
			}
			break
		}
	}
	attrs, aerr := a.queueAttributes(q, st, a.queueARN(c.r, q.name()), in.AttributeNames)
	if aerr != nil {
		return nil, aerr
	}
	return struct {
		Attributes map[string]string `json:"Attributes,omitempty"`
	}{attrs}, nil
}

func (a *API) setQueueAttributes(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		Attributes map[string]string `json:"Attributes"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if len(in.Attributes) == 0 {
		return nil, errMissingParameter.f("The request must contain the parameter Attributes.")
	}
	q, err := a.lookup(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	attrs := normalAttrs(in.Attributes)
	if err := checkSetAttrs(attrs, q.fifo); err != nil {
		return nil, err
	}
	if err := a.linkDeadLetterQueue(ctx, q.name(), q.fifo, attrs); err != nil {
		return nil, err
	}
	// FifoQueue can only be what it is: it changes nothing.
	delete(attrs, attrFifo)
	if len(attrs) == 0 {
		return empty{}, nil
	}
	if _, ok := attrs[attrDedupScope]; ok && q.rec.Attributes[dedupScopeKey] == "" {
		attrs[dedupScopeKey] = dedupScope(q.rec.Attributes)
	}
	return a.setAttrs(ctx, q.name(), withEncryption(attrs))
}

// setAttrs changes a queue's record and the cache.
func (a *API) setAttrs(ctx context.Context, name string, attrs map[string]string) (any, error) {
	rec, err := a.st.SetQueueAttributes(ctx, name, attrs)
	if err != nil {
		a.forget(name)
		return nil, asMissingQueue(err, name)
	}
	a.remember(rec, a.clk.Monotonic())
	return empty{}, nil
}

// asMissingQueue reports a queue deleted under a request as SQS does.
func asMissingQueue(err error, name string) error {
	if errors.Is(err, store.ErrNotFound) {
		return errQueueDoesNotExist.f("The specified queue does not exist.")
	}
	return err
}

// maxTags is how many tags a queue takes.
const maxTags = 50

// checkTags applies SQS's limits to tags: at most 50, keys 1 to 128
// characters, values at most 256.
func checkTags(tags map[string]string) *apiError {
	if len(tags) > maxTags {
		return errInvalidParameter.f("a queue takes at most %d tags, not %d", maxTags, len(tags))
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 || len(v) > 256 {
			return errInvalidParameter.f("tag %q: keys are 1 to 128 characters and values at most 256", k)
		}
	}
	return nil
}

func (a *API) tagQueue(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		Tags map[string]string `json:"Tags"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if len(in.Tags) == 0 {
		return nil, errMissingParameter.f("The request must contain the parameter Tags.")
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	q, err := a.lookup(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	attrs := map[string]string{}
	tags := len(in.Tags)
	for k, v := range in.Tags {
		attrs[tagKey(k)] = tagValue(v)
		// A tag kept before empty values could be is replaced.
		attrs[legacyTagPrefix+k] = ""
	}
	for t := range queueTags(q.rec.Attributes) {
		if _, again := in.Tags[t]; !again {
			tags++
		}
	}
	if tags > maxTags {
		return nil, errInvalidParameter.f("a queue takes at most %d tags; %s would have %d", maxTags, q.name(), tags)
	}
	return a.setAttrs(ctx, q.name(), withEncryption(attrs))
}

func (a *API) untagQueue(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		TagKeys []string `json:"TagKeys"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if len(in.TagKeys) == 0 {
		return nil, errMissingParameter.f("The request must contain the parameter TagKeys.")
	}
	q, err := a.lookup(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	attrs := map[string]string{}
	for _, k := range in.TagKeys {
		attrs[tagKey(k)] = ""
		attrs[legacyTagPrefix+k] = ""
	}
	return a.setAttrs(ctx, q.name(), withEncryption(attrs))
}

func (a *API) listQueueTags(ctx context.Context, c *call) (any, error) {
	var in queueInput
	q, err := a.open(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	tags := queueTags(q.rec.Attributes)
	return struct {
		Tags map[string]string `json:"Tags,omitempty"`
	}{tags}, nil
}
