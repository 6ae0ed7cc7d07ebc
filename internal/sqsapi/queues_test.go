package sqsapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/store"
)

// gatedStore holds the first CreateQueue until released, and tells when
// each QueueInfo has answered.
type gatedStore struct {
	store.Store
	inCreate, release chan struct{}
	infos             chan struct{}
	gated             bool
}

func newGatedStore(st store.Store) *gatedStore {
	return &gatedStore{Store: st, inCreate: make(chan struct{}), release: make(chan struct{}), infos: make(chan struct{}, 100)}
}

func (s *gatedStore) CreateQueue(ctx context.Context, q string, attrs map[string]string) (store.QueueInfo, bool, error) {
	if !s.gated {
		s.gated = true // only the first create's goroutine gets here before the gate opens
		close(s.inCreate)
		<-s.release
	}
	return s.Store.CreateQueue(ctx, q, attrs)
}

func (s *gatedStore) QueueInfo(ctx context.Context, q string) (store.QueueInfo, error) {
	defer func() { s.infos <- struct{}{} }()
	return s.Store.QueueInfo(ctx, q)
}

func (s *gatedStore) drainInfos() {
	for {
		select {
		case <-s.infos:
		default:
			return
		}
	}
}

func gatedSetup(t *testing.T, maxQueues int) (bundle, *gatedStore) {
	var gs *gatedStore
	b := setup(t, func(c *Config) {
		gs = newGatedStore(c.Store)
		c.Store, c.MaxQueues = gs, maxQueues
	})
	return b, gs
}

// Two creates of one new queue at the limit: the second, which found no
// queue before the first made it, gets the queue's URL, not OverLimit.
func TestConcurrentCreatesOfOneQueueAtTheLimit(t *testing.T) {
	b, gs := gatedSetup(t, 1)
	first := make(chan answer)
	go func() { first <- b.call(t, "CreateQueue", `{"QueueName":"jobs"}`) }()
	<-gs.inCreate
	gs.drainInfos()
	second := make(chan answer)
	go func() { second <- b.call(t, "CreateQueue", `{"QueueName":"jobs"}`) }()
	<-gs.infos // the second found no queue of the name
	close(gs.release)
	for _, ch := range []chan answer{first, second} {
		if a := <-ch; a.status != http.StatusOK || !strings.HasSuffix(string(a.body), `/jobs"}`+"\n") {
			t.Fatalf("CreateQueue of jobs: %d %s", a.status, a.body)
		}
	}
}

// A create waiting for another one's store calls gives up when its
// request ends, with a 503 to retry.
func TestCreateWaitingForAnotherEndsWithItsRequest(t *testing.T) {
	b, gs := gatedSetup(t, 10)
	first := make(chan answer)
	go func() { first <- b.call(t, "CreateQueue", `{"QueueName":"one"}`) }()
	<-gs.inCreate
	gs.drainInfos()
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan answer)
	go func() {
		second <- b.do(t, request("CreateQueue", `{"QueueName":"two"}`).WithContext(ctx))
	}()
	<-gs.infos // the second is on its way to the lock
	cancel()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case a := <-second:
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
			t.Fatalf("a create whose request ended while it waited: %d %s", a.status, a.body)
		}
	case <-timer.C:
		t.Fatal("a create whose request ended still waits for another create's store calls")
	}
	close(gs.release)
	if a := <-first; a.status != http.StatusOK {
		t.Fatalf("the first create: %d %s", a.status, a.body)
	}
}

// Deleting a queue twice takes it off the count once: the bound still
// holds after.
func TestDeleteCountsOnlyWhatItDeleted(t *testing.T) {
	b := setup(t, func(c *Config) { c.MaxQueues = 2 })
	for _, q := range []string{"a", "b"} {
		if a := b.call(t, "CreateQueue", `{"QueueName":"`+q+`"}`); a.status != http.StatusOK {
			t.Fatalf("CreateQueue %s: %d %s", q, a.status, a.body)
		}
	}
	// Both deletes found the queue; the second deletes nothing.
	q, err := b.api.lookup(context.Background(), "/a")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := b.api.remove(context.Background(), q.name()); err != nil {
			t.Fatal(err)
		}
	}
	if a := b.call(t, "CreateQueue", `{"QueueName":"c"}`); a.status != http.StatusOK {
		t.Fatalf("CreateQueue once a queue was deleted: %d %s", a.status, a.body)
	}
	if a := b.call(t, "CreateQueue", `{"QueueName":"d"}`); a.Type != "OverLimit" {
		t.Fatalf("CreateQueue of a third queue: %d %s, want OverLimit", a.status, a.body)
	}
}

// collated lists queues in an order of its own, as PostgreSQL does in a
// collation other than C ("Qa" before "QB").
type collated struct {
	store.Store
	names []string
}

func (c collated) Queues(context.Context) ([]string, error) { return c.names, nil }

// ListQueues with a prefix pages through every queue once, whatever
// order the store lists them in; a NextToken that names no queue this
// server could have given is refused.
func TestListQueuesWithAPrefixPagesEveryQueueOnce(t *testing.T) {
	b := setup(t, func(c *Config) { c.Store = collated{c.Store, []string{"Qa", "QB", "Qc", "other"}} })
	var seen []string
	token := ""
	for range 10 {
		body := `{"QueueNamePrefix":"Q","MaxResults":1`
		if token != "" {
			body += `,"NextToken":"` + token + `"`
		}
		got := b.call(t, "ListQueues", body+"}")
		var out struct {
			QueueUrls []string
			NextToken string
		}
		if err := json.Unmarshal(got.body, &out); err != nil || got.status != 200 {
			t.Fatalf("ListQueues: %d %s %v", got.status, got.body, err)
		}
		for _, u := range out.QueueUrls {
			seen = append(seen, u[strings.LastIndexByte(u, '/')+1:])
		}
		if token = out.NextToken; token == "" {
			break
		}
	}
	slices.Sort(seen)
	if want := []string{"QB", "Qa", "Qc"}; !slices.Equal(seen, want) {
		t.Fatalf("pages listed %q, want each of %q once", seen, want)
	}
	for _, bad := range []string{"AA", "_w8", base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("q", 300)))} {
		if got := b.call(t, "ListQueues", `{"QueueNamePrefix":"Q","MaxResults":1,"NextToken":"`+bad+`"}`); got.Type != "InvalidParameterValueException" {
			t.Errorf("NextToken %q: %d %s, want InvalidParameterValue", bad, got.status, got.Type)
		}
	}
}

// Refused attributes and permissions get Amazon SQS's codes and texts,
// word for word.
func TestAttributeAndPermissionErrorsAreAmazons(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	for _, tc := range []struct {
		action, body, typ, msg string
	}{
		{"CreateQueue", `{"QueueName":"s","Attributes":{"FifoThroughputLimit":"perQueue"}}`, "InvalidAttributeName",
			"You can specify the FifoThroughputLimit only when FifoQueue is set to true."},
		{"CreateQueue", `{"QueueName":"s","Attributes":{"DeduplicationScope":"queue"}}`, "InvalidAttributeName",
			"You can specify the DeduplicationScope only when FifoQueue is set to true."},
		{"CreateQueue", `{"QueueName":"s","Attributes":{"ContentBasedDeduplication":"true"}}`, "InvalidAttributeName",
			"Unknown Attribute ContentBasedDeduplication."},
		{"GetQueueAttributes", `{"QueueUrl":"q","AttributeNames":["Foobar"]}`, "InvalidAttributeName", "Unknown Attribute Foobar."},
		{"RemovePermission", `{"QueueUrl":"q","Label":"nope"}`, "InvalidParameterValueException",
			"Value nope for parameter Label is invalid. Reason: can't find label."},
		{"SetQueueAttributes", `{"QueueUrl":"q","Attributes":{"KmsMasterKeyId":"k","SqsManagedSseEnabled":"true"}}`, "InvalidAttributeName",
			"You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE."},
	} {
		if got := b.call(t, tc.action, tc.body); got.status != 400 || got.Type != tc.typ || got.Msg != tc.msg {
			t.Errorf("%s %s: %d %s %q\nwant %s %q", tc.action, tc.body, got.status, got.Type, got.Msg, tc.typ, tc.msg)
		}
	}
	b.call(t, "AddPermission", `{"QueueUrl":"q","Label":"l","AWSAccountIds":["111122223333"],"Actions":["SendMessage"]}`)
	var attrs struct{ Attributes map[string]string }
	_ = json.Unmarshal(b.call(t, "GetQueueAttributes", `{"QueueUrl":"q","AttributeNames":["Policy"]}`).body, &attrs)
	if !strings.Contains(attrs.Attributes["Policy"], `"Version":"2008-10-17"`) {
		t.Fatalf("the policy AddPermission wrote: %s", attrs.Attributes["Policy"])
	}
}

// A KMS key turns SQS-managed encryption off, and without a KMS key the
// data key's reuse period is not shown, as in SQS.
func TestKMSAttributes(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	attrs := func() map[string]string { return attrsOf(t, b, "q") }
	if a := attrs(); a["SqsManagedSseEnabled"] != "true" || a["KmsMasterKeyId"] != "" || a["KmsDataKeyReusePeriodSeconds"] != "" {
		t.Fatalf("at first: %v", a)
	}
	b.call(t, "SetQueueAttributes", `{"QueueUrl":"q","Attributes":{"KmsMasterKeyId":"k","KmsDataKeyReusePeriodSeconds":"6000"}}`)
	if a := attrs(); a["SqsManagedSseEnabled"] != "false" || a["KmsMasterKeyId"] != "k" || a["KmsDataKeyReusePeriodSeconds"] != "6000" {
		t.Fatalf("with a KMS key: %v", a)
	}
	b.call(t, "SetQueueAttributes", `{"QueueUrl":"q","Attributes":{"KmsMasterKeyId":"","KmsDataKeyReusePeriodSeconds":"300"}}`)
	a := attrs()
	if _, ok := a["KmsMasterKeyId"]; ok || a["SqsManagedSseEnabled"] != "false" {
		t.Fatalf("with the KMS key cleared: %v", a)
	}
	if _, ok := a["KmsDataKeyReusePeriodSeconds"]; ok {
		t.Fatalf("with the KMS key cleared, the reuse period is still shown: %v", a)
	}
}

// An empty MessageGroupId or MessageDeduplicationId is given, and
// invalid, in both protocols, with Amazon's text; absent ones are not.
func TestEmptyMessageIDsAreInvalid(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	b.call(t, "CreateQueue", `{"QueueName":"f.fifo","Attributes":{"FifoQueue":"true"}}`)
	text := func(what string) string {
		return "Value  for parameter " + what + " is invalid. Reason: " + what + " can only include alphanumeric and punctuation characters. 1 to 128 in length."
	}
	for _, tc := range []struct{ body, what string }{
		{`{"QueueUrl":"q","MessageBody":"x","MessageGroupId":""}`, "MessageGroupId"},
		{`{"QueueUrl":"f.fifo","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":""}`, "MessageDeduplicationId"},
	} {
		if got := b.call(t, "SendMessage", tc.body); got.status != 400 || got.Type != "InvalidParameterValueException" || got.Msg != text(tc.what) {
			t.Errorf("%s: %d %s %q", tc.body, got.status, got.Type, got.Msg)
		}
	}
	a := b.query(t, formRequest("/000000000000/q", "Action=SendMessage&MessageBody=x&MessageGroupId="))
	if a.status != 400 || a.Error.Code != "InvalidParameterValue" || a.Error.Message != text("MessageGroupId") {
		t.Errorf("query: %d %s", a.status, a.body)
	}
	if got := b.call(t, "SendMessage", `{"QueueUrl":"q","MessageBody":"x"}`); got.status != 200 {
		t.Fatalf("a send without a group: %d %s", got.status, got.body)
	}
	var failed struct {
		Failed []struct{ Id, Code, Message string }
	}
	_ = json.Unmarshal(b.call(t, "SendMessageBatch", `{"QueueUrl":"q","Entries":[{"Id":"a","MessageBody":"x","MessageGroupId":""},{"Id":"b","MessageBody":"y"}]}`).body, &failed)
	if len(failed.Failed) != 1 || failed.Failed[0].Id != "a" || failed.Failed[0].Message != text("MessageGroupId") {
		t.Fatalf("batch: %+v", failed)
	}
}

// The 60-second cooldowns of SQS, on the server's clock: a queue purged
// is not purged again within them (PurgeQueueInProgress, 403), and a
// queue's name is not created again within them of its deletion
// (QueueDeletedRecently); both in the query protocol too.
func TestCooldowns(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	if got := b.call(t, "PurgeQueue", `{"QueueUrl":"q"}`); got.status != 200 {
		t.Fatalf("first purge: %d %s", got.status, got.body)
	}
	b.call(t, "SendMessage", `{"QueueUrl":"q","MessageBody":"kept"}`)
	b.clk.Advance(cooldown - time.Millisecond)
	got := b.call(t, "PurgeQueue", `{"QueueUrl":"q"}`)
	if got.status != 403 || got.Type != "PurgeQueueInProgress" || got.Msg != "Only one PurgeQueue operation on q is allowed every 60 seconds." ||
		got.header.Get("X-Amzn-Query-Error") != "AWS.SimpleQueueService.PurgeQueueInProgress;Sender" {
		t.Fatalf("purge within the cooldown: %d %s %q %v", got.status, got.Type, got.Msg, got.header)
	}
	if a := b.query(t, formRequest("/000000000000/q", "Action=PurgeQueue")); a.status != 403 || a.Error.Code != "AWS.SimpleQueueService.PurgeQueueInProgress" {
		t.Fatalf("query purge within the cooldown: %d %s", a.status, a.body)
	}
	if n := attrsOf(t, b, "q")["ApproximateNumberOfMessages"]; n != "1" {
		t.Fatalf("a refused purge purged: %s messages", n)
	}
	b.clk.Advance(time.Millisecond)
	if got := b.call(t, "PurgeQueue", `{"QueueUrl":"q"}`); got.status != 200 {
		t.Fatalf("purge after the cooldown: %d %s", got.status, got.body)
	}

	b.call(t, "DeleteQueue", `{"QueueUrl":"q"}`)
	b.clk.Advance(cooldown - time.Millisecond)
	got = b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	if got.status != 400 || got.Type != "QueueDeletedRecently" ||
		got.Msg != "You must wait 60 seconds after deleting a queue before you can create another with the same name." ||
		got.header.Get("X-Amzn-Query-Error") != "AWS.SimpleQueueService.QueueDeletedRecently;Sender" {
		t.Fatalf("create within the cooldown: %d %s %q", got.status, got.Type, got.Msg)
	}
	if got := b.call(t, "GetQueueUrl", `{"QueueName":"q"}`); got.Type != "QueueDoesNotExist" {
		t.Fatalf("a refused create created: %+v", got)
	}
	if got := b.call(t, "CreateQueue", `{"QueueName":"other"}`); got.status != 200 {
		t.Fatalf("another name: %d %s", got.status, got.body)
	}
	b.clk.Advance(time.Millisecond)
	if got := b.call(t, "CreateQueue", `{"QueueName":"q"}`); got.status != 200 {
		t.Fatalf("create after the cooldown: %d %s", got.status, got.body)
	}
}

// A queue's last purge is kept in its record: a server started again on
// the database refuses a purge within the cooldown too.
func TestPurgeCooldownOutlivesTheServer(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		u := f.create("q", nil)
		if _, err := f.c.PurgeQueue(f.ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(u)}); err != nil {
			t.Fatal(err)
		}
		f.restart()
		f.clk.Advance(cooldown / 2)
		_, err := f.c.PurgeQueue(f.ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(u)})
		wantRefused(t, "a purge within the cooldown, after a restart", err, 403, "AWS.SimpleQueueService.PurgeQueueInProgress",
			"Only one PurgeQueue operation on q is allowed every 60 seconds.")
		f.clk.Advance(cooldown / 2)
		if _, err := f.c.PurgeQueue(f.ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(u)}); err != nil {
			t.Fatalf("a purge after the cooldown: %v", err)
		}
	})
}

// attrsOf is every attribute of queue name.
func attrsOf(t *testing.T, b bundle, name string) map[string]string {
	t.Helper()
	var out struct{ Attributes map[string]string }
	if err := json.Unmarshal(b.call(t, "GetQueueAttributes", `{"QueueUrl":"`+name+`","AttributeNames":["All"]}`).body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Attributes
}

// A message over the queue's MaximumMessageSize is refused with Amazon's
// texts, which differ between SendMessage and a batch's entry.
func TestTooLongMessageTexts(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q","Attributes":{"MaximumMessageSize":"1024"}}`)
	long := strings.Repeat("x", 1025)
	if got := b.call(t, "SendMessage", `{"QueueUrl":"q","MessageBody":"`+long+`"}`); got.status != 400 ||
		got.Msg != "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes." {
		t.Errorf("SendMessage: %d %q", got.status, got.Msg)
	}
	var out struct {
		Failed []struct{ Id, Code, Message string }
	}
	_ = json.Unmarshal(b.call(t, "SendMessageBatch", `{"QueueUrl":"q","Entries":[{"Id":"a","MessageBody":"`+long+`"},{"Id":"b","MessageBody":"ok"}]}`).body, &out)
	if len(out.Failed) != 1 || out.Failed[0].Id != "a" || out.Failed[0].Code != "InvalidParameterValue" ||
		out.Failed[0].Message != "One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes." {
		t.Errorf("SendMessageBatch: %+v", out)
	}
}
