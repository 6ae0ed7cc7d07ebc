package serve_test

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/store"
)

func TestQueueActions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("jobs", map[string]string{"VisibilityTimeout": "45", "DelaySeconds": "0"})
		if !strings.HasSuffix(url, "/000000000000/jobs") {
			t.Fatalf("queue URL %s", url)
		}
		// The same name and attributes again is the same queue; other values
		// are a conflict.
		if again := f.createQueue("jobs", map[string]string{"VisibilityTimeout": "45"}); again != url {
			t.Fatalf("second CreateQueue gave %s, want %s", again, url)
		}
		_, err := f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"), Attributes: map[string]string{"VisibilityTimeout": "46"}})
		wantCode(t, "CreateQueue with another VisibilityTimeout", err, "QueueAlreadyExists")
		_, err = f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String("bad name!")})
		wantCode(t, "CreateQueue with a bad name", err, "InvalidParameterValue")
		_, err = f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String("x"), Attributes: map[string]string{"Colour": "red"}})
		wantCode(t, "CreateQueue with an unknown attribute", err, "InvalidAttributeName")
		_, err = f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String("x"), Attributes: map[string]string{"VisibilityTimeout": "-1"}})
		wantCode(t, "CreateQueue with a bad value", err, "InvalidAttributeValue")

		got, err := f.c.GetQueueUrl(f.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("jobs")})
		if err != nil || *got.QueueUrl != url {
			t.Fatalf("GetQueueUrl = %v, %v", got, err)
		}
		_, err = f.c.GetQueueUrl(f.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
		var missing *types.QueueDoesNotExist
		if !errors.As(err, &missing) {
			t.Fatalf("GetQueueUrl of a missing queue: %v, want QueueDoesNotExist", err)
		}

		for _, n := range []string{"jobs-2", "mail", "jobs-3"} {
			f.createQueue(n, nil)
		}
		list, err := f.c.ListQueues(f.ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("jobs"), MaxResults: aws.Int32(2)})
		if err != nil || len(list.QueueUrls) != 2 || list.NextToken == nil || !strings.HasSuffix(list.QueueUrls[1], "/jobs-2") {
			t.Fatalf("ListQueues page 1 = %+v, %v", list, err)
		}
		list, err = f.c.ListQueues(f.ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("jobs"), MaxResults: aws.Int32(2), NextToken: list.NextToken})
		if err != nil || len(list.QueueUrls) != 1 || !strings.HasSuffix(list.QueueUrls[0], "/jobs-3") {
			t.Fatalf("ListQueues page 2 = %+v, %v", list, err)
		}

		a := f.attrs(url)
		for k, want := range map[string]string{"VisibilityTimeout": "45", "DelaySeconds": "0", "MaximumMessageSize": "1048576",
			"MessageRetentionPeriod": "345600", "ReceiveMessageWaitTimeSeconds": "0", "ApproximateNumberOfMessages": "0",
			"QueueArn": "arn:aws:sqs:us-east-1:000000000000:jobs"} {
			if a[k] != want {
				t.Errorf("attribute %s = %q, want %q", k, a[k], want)
			}
		}
		// A redrive policy's dead-letter queue exists.
		f.createQueue("dead", nil)
		_, err = f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{
			"VisibilityTimeout": "60", "DelaySeconds": "5", "MessageRetentionPeriod": "86400",
			"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dead","maxReceiveCount":"3"}`}})
		if err != nil {
			t.Fatal(err)
		}
		a = f.attrs(url)
		if a["VisibilityTimeout"] != "60" || a["DelaySeconds"] != "5" || a["MessageRetentionPeriod"] != "86400" || !strings.Contains(a["RedrivePolicy"], `"maxReceiveCount":"3"`) {
			t.Fatalf("attributes after SetQueueAttributes: %v", a)
		}
		_, err = f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"VisibilityTimeout": "5", "Bogus": "1"}})
		wantCode(t, "SetQueueAttributes with an unknown name", err, "InvalidAttributeName")
		if f.attrs(url)["VisibilityTimeout"] != "60" {
			t.Fatal("a refused SetQueueAttributes changed VisibilityTimeout")
		}
		_, err = f.c.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"Bogus"}})
		wantCode(t, "GetQueueAttributes of an unknown name", err, "InvalidAttributeName")

		if _, err := f.c.TagQueue(f.ctx, &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: map[string]string{"team": "a", "env": "test"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.UntagQueue(f.ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(url), TagKeys: []string{"env"}}); err != nil {
			t.Fatal(err)
		}
		tags, err := f.c.ListQueueTags(f.ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
		if err != nil || len(tags.Tags) != 1 || tags.Tags["team"] != "a" {
			t.Fatalf("ListQueueTags = %v, %v", tags, err)
		}

		// Purge empties the queue and keeps it; delete removes it.
		_, err = f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"DelaySeconds": "0"}})
		if err != nil {
			t.Fatal(err)
		}
		f.send(url, "one", "")
		f.send(url, "two", "")
		f.receive(url, 1, 30)
		if _, err := f.c.PurgeQueue(f.ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
			t.Fatal(err)
		}
		a = f.attrs(url)
		if a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" || a["VisibilityTimeout"] != "60" {
			t.Fatalf("attributes after PurgeQueue: %v", a)
		}
		if _, err := f.c.DeleteQueue(f.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			t.Fatal(err)
		}
		_, err = f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x")})
		wantCode(t, "SendMessage to a deleted queue", err, "AWS.SimpleQueueService.NonExistentQueue")
	})
}

func TestSendReceiveDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("work", nil)
		sent, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("héllo"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"colour": {DataType: aws.String("String"), StringValue: aws.String("red")},
				"size":   {DataType: aws.String("Number"), StringValue: aws.String("12")},
				"blob":   {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2}},
			},
			MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
				"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-abc")},
			}})
		if err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum([]byte("héllo"))
		if *sent.MD5OfMessageBody != hex.EncodeToString(sum[:]) || sent.MD5OfMessageAttributes == nil || sent.MD5OfMessageSystemAttributes == nil {
			t.Fatalf("SendMessage output %+v", sent)
		}
		f.send(url, "later", "")
		_, err = f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("delayed"), DelaySeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		a := f.attrs(url)
		if a["ApproximateNumberOfMessages"] != "2" || a["ApproximateNumberOfMessagesDelayed"] != "1" {
			t.Fatalf("counts before receiving: %v", a)
		}

		f.clk.Advance(1500 * time.Millisecond)
		out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("ReceiveMessage = %+v, %v", out, err)
		}
		m := out.Messages[0]
		if *m.Body != "héllo" || *m.MessageId != *sent.MessageId || len(m.MessageAttributes) != 3 ||
			*m.MessageAttributes["colour"].StringValue != "red" || string(m.MessageAttributes["blob"].BinaryValue) != "\x00\x01\x02" {
			t.Fatalf("received %+v", m)
		}
		if *m.MD5OfMessageAttributes != *sent.MD5OfMessageAttributes {
			t.Fatalf("MD5OfMessageAttributes %s on receive, %s on send", *m.MD5OfMessageAttributes, *sent.MD5OfMessageAttributes)
		}
		sentAt, _ := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64)
		firstAt, _ := strconv.ParseInt(m.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64)
		if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["AWSTraceHeader"] != "Root=1-abc" || firstAt-sentAt != 1500 {
			t.Fatalf("system attributes %v", m.Attributes)
		}
		a = f.attrs(url)
		if a["ApproximateNumberOfMessages"] != "1" || a["ApproximateNumberOfMessagesNotVisible"] != "1" {
			t.Fatalf("counts after receiving one: %v", a)
		}
		if _, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
			ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 120}); err != nil {
			t.Fatal(err)
		}
		// The lease now lasts 120 s from here: past the queue's 30 s, it
		// is still held.
		f.clk.Advance(60 * time.Second)
		f.reap()
		if err := f.delete(url, *m.ReceiptHandle); err != nil {
			t.Fatalf("DeleteMessage after extending: %v", err)
		}
		// A delete repeated with the same handle (a retry whose answer
		// was lost) succeeds and changes nothing.
		if err := f.delete(url, *m.ReceiptHandle); err != nil {
			t.Fatalf("DeleteMessage repeated: %v", err)
		}
		err = f.delete(url, "not-a-handle")
		wantCode(t, "DeleteMessage of a malformed handle", err, "ReceiptHandleIsInvalid")

		// A handle is good only with its own queue.
		other := f.createQueue("other", nil)
		got := f.receive(url, 10, 30)
		if len(got) != 2 {
			t.Fatalf("received %v, want later and delayed", bodies(got))
		}
		wantCode(t, "DeleteMessage through another queue", f.delete(other, got[0].handle), "ReceiptHandleIsInvalid")
		// Visibility 0 gives a message back at once.
		if _, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
			ReceiptHandle: aws.String(got[0].handle), VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
		again := f.receive(url, 10, 30)
		if len(again) != 1 || again[0].id != got[0].id {
			t.Fatalf("after visibility 0 received %v", bodies(again))
		}
	})
}

func TestStaleReceiptHandleIsRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("fenced", nil)
		f.send(url, "job", "")
		first := f.receive(url, 1, 10)
		// The first receiver stalls past its visibility timeout; the reaper
		// gives the message back and a second receiver takes it.
		f.clk.Advance(11 * time.Second)
		f.reap()
		second := f.receive(url, 1, 10)
		if len(first) != 1 || len(second) != 1 || first[0].id != second[0].id || first[0].handle == second[0].handle {
			t.Fatalf("first %v, second %v", first, second)
		}
		wantCode(t, "DeleteMessage under the stale handle", f.delete(url, first[0].handle), "ReceiptHandleIsInvalid")
		_, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
			ReceiptHandle: aws.String(first[0].handle), VisibilityTimeout: 300})
		wantCode(t, "ChangeMessageVisibility under the stale handle", err, "ReceiptHandleIsInvalid")
		// Nothing changed: the second receiver still holds it and deletes it.
		if a := f.attrs(url); a["ApproximateNumberOfMessagesNotVisible"] != "1" {
			t.Fatalf("after the stale calls: %v", a)
		}
		if err := f.delete(url, second[0].handle); err != nil {
			t.Fatalf("DeleteMessage under the current handle: %v", err)
		}
	})
}

func TestGroupOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		// A FIFO receive gives a group's messages together, in order.
		url := f.createQueue("ordered.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
		for _, m := range []struct{ body, group string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"a3", "a"}} {
			f.send(url, m.body, m.group)
		}
		got := f.receive(url, 10, 30)
		if want := []string{"a1", "a2", "a3", "b1"}; !slices.Equal(bodies(got), want) {
			t.Fatalf("received %v, want %v", bodies(got), want)
		}
		for _, m := range got {
			if err := f.delete(url, m.handle); err != nil {
				t.Fatal(err)
			}
		}
		fifo, _ := f.c.GetQueueUrl(f.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("ordered.fifo")})
		_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: fifo.QueueUrl, MessageBody: aws.String("x")})
		wantCode(t, "SendMessage to a FIFO queue without a group", err, "MissingParameter")
		// Content-based deduplication: the same body within the window is
		// the same message.
		one, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: fifo.QueueUrl, MessageBody: aws.String("same"), MessageGroupId: aws.String("g")})
		if err != nil {
			t.Fatal(err)
		}
		two, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: fifo.QueueUrl, MessageBody: aws.String("same"), MessageGroupId: aws.String("g")})
		if err != nil || *one.MessageId != *two.MessageId || one.SequenceNumber == nil {
			t.Fatalf("dedup: %v / %v, %v", one.MessageId, two.MessageId, err)
		}
	})
}

func TestBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("batch", map[string]string{"MaximumMessageSize": "1024"})
		out, err := f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.SendMessageBatchRequestEntry{
			{Id: aws.String("ok1"), MessageBody: aws.String("one")},
			{Id: aws.String("big"), MessageBody: aws.String(strings.Repeat("x", 1025))},
			{Id: aws.String("ok2"), MessageBody: aws.String("two")},
			{Id: aws.String("badattr"), MessageBody: aws.String("three"), MessageAttributes: map[string]types.MessageAttributeValue{
				"AWS.reserved": {DataType: aws.String("String"), StringValue: aws.String("v")}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Successful) != 2 || len(out.Failed) != 2 || *out.Failed[0].Id != "big" || *out.Failed[0].Code != "InvalidParameterValue" || !out.Failed[0].SenderFault {
			t.Fatalf("SendMessageBatch = %+v", out)
		}
		entries := func(n int) []types.SendMessageBatchRequestEntry {
			var es []types.SendMessageBatchRequestEntry
			for i := range n {
				es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), MessageBody: aws.String("m")})
			}
			return es
		}
		_, err = f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries(11)})
		wantCode(t, "11 entries", err, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest")
		_, err = f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.SendMessageBatchRequestEntry{}})
		wantCode(t, "no entries", err, "AWS.SimpleQueueService.EmptyBatchRequest")
		twice := entries(2)
		twice[1].Id = twice[0].Id
		_, err = f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: twice})
		wantCode(t, "repeated ids", err, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")
		bad := entries(1)
		bad[0].Id = aws.String("no spaces")
		_, err = f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: bad})
		wantCode(t, "bad id", err, "AWS.SimpleQueueService.InvalidBatchEntryId")
		if a := f.attrs(url); a["ApproximateNumberOfMessages"] != "2" {
			t.Fatalf("refused batches enqueued something: %v", a)
		}

		got := f.receive(url, 10, 10)
		if len(got) != 2 {
			t.Fatalf("received %v", bodies(got))
		}
		// The first message's lease is lost to a reclaim; the batches
		// settle the second and refuse the first.
		f.clk.Advance(11 * time.Second)
		f.reap()
		again := f.receive(url, 10, 60)
		if len(again) != 2 {
			t.Fatalf("received again %v", bodies(again))
		}
		vis, err := f.c.ChangeMessageVisibilityBatch(f.ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url),
			Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
				{Id: aws.String("stale"), ReceiptHandle: aws.String(got[0].handle), VisibilityTimeout: 100},
				{Id: aws.String("live"), ReceiptHandle: aws.String(again[0].handle), VisibilityTimeout: 100},
			}})
		if err != nil || len(vis.Successful) != 1 || *vis.Successful[0].Id != "live" || len(vis.Failed) != 1 ||
			*vis.Failed[0].Id != "stale" || *vis.Failed[0].Code != "ReceiptHandleIsInvalid" {
			t.Fatalf("ChangeMessageVisibilityBatch = %+v, %v", vis, err)
		}
		del, err := f.c.DeleteMessageBatch(f.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url),
			Entries: []types.DeleteMessageBatchRequestEntry{
				{Id: aws.String("stale"), ReceiptHandle: aws.String(got[1].handle)},
				{Id: aws.String("live1"), ReceiptHandle: aws.String(again[0].handle)},
				{Id: aws.String("live2"), ReceiptHandle: aws.String(again[1].handle)},
			}})
		if err != nil || len(del.Successful) != 2 || len(del.Failed) != 1 || *del.Failed[0].Id != "stale" || *del.Failed[0].Code != "ReceiptHandleIsInvalid" {
			t.Fatalf("DeleteMessageBatch = %+v, %v", del, err)
		}
	})
}

func TestRedrivePolicyDeadLetters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("poison", map[string]string{"RedrivePolicy": `{"maxReceiveCount":2}`})
		f.send(url, "bad", "")
		for i := range 2 {
			got := f.receive(url, 1, 30)
			if len(got) != 1 {
				t.Fatalf("receive %d got %v", i+1, bodies(got))
			}
			if _, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
				ReceiptHandle: aws.String(got[0].handle), VisibilityTimeout: 0}); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.receive(url, 1, 30); len(got) != 0 {
			t.Fatalf("a third receive got %v", bodies(got))
		}
		st, err := f.st.Stats(f.ctx, "poison")
		if err != nil || st.Dead != 1 {
			t.Fatalf("stats %+v, %v; want one dead", st, err)
		}
		if n, err := f.st.Redrive(f.ctx, "poison", nil); err != nil || n != 1 {
			t.Fatalf("Redrive = %d, %v", n, err)
		}
		if got := f.receive(url, 1, 30); len(got) != 1 || got[0].body != "bad" {
			t.Fatalf("after redrive got %v", bodies(got))
		}
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("strict", map[string]string{"MaximumMessageSize": "1024"})
		for _, tc := range []struct {
			name string
			in   *sqs.SendMessageInput
			code string
		}{
			{"too long", &sqs.SendMessageInput{MessageBody: aws.String(strings.Repeat("x", 1025))}, "InvalidParameterValue"},
			{"attributes make it too long", &sqs.SendMessageInput{MessageBody: aws.String(strings.Repeat("x", 1000)),
				MessageAttributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("y", 30))}}}, "InvalidParameterValue"},
			{"bad characters", &sqs.SendMessageInput{MessageBody: aws.String("a\x00b")}, "InvalidMessageContents"},
			{"bad attribute name", &sqs.SendMessageInput{MessageBody: aws.String("x"),
				MessageAttributes: map[string]types.MessageAttributeValue{"a..b": {DataType: aws.String("String"), StringValue: aws.String("v")}}}, "InvalidParameterValue"},
			{"bad number", &sqs.SendMessageInput{MessageBody: aws.String("x"),
				MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number"), StringValue: aws.String("ten")}}}, "InvalidParameterValue"},
			{"delay too long", &sqs.SendMessageInput{MessageBody: aws.String("x"), DelaySeconds: 901}, "InvalidParameterValue"},
		} {
			tc.in.QueueUrl = aws.String(url)
			_, err := f.c.SendMessage(f.ctx, tc.in)
			wantCode(t, tc.name, err, tc.code)
		}
		_, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 11})
		wantCode(t, "MaxNumberOfMessages 11", err, "InvalidParameterValue")
		_, err = f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MessageSystemAttributeNames: []types.MessageSystemAttributeName{"Colour"}})
		wantCode(t, "an unknown system attribute", err, "InvalidAttributeName")
		st, err := f.st.Stats(f.ctx, "strict")
		if err != nil || st.Pending != 0 {
			t.Fatalf("refused sends enqueued: %+v, %v", st, err)
		}
	})
}

func TestSignatures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{signed: true})
		url := f.createQueue("signed", nil)
		f.send(url, "ok", "")
		send := func(c *sqs.Client) error {
			_, err := c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("refused")})
			return err
		}
		wantCode(t, "wrong secret", send(f.client(testKey, "wrong")), "SignatureDoesNotMatch")
		wantCode(t, "unknown key", send(f.client("AKIDOTHER", testSecret)), "InvalidClientTokenId")
		wantCode(t, "unsigned", send(f.client("", "")), "MissingAuthenticationToken")
		// The server's clock runs 16 minutes ahead of the signer's.
		f.clk.Advance(16 * time.Minute)
		wantCode(t, "expired", send(f.c), "RequestExpired")
		st, err := f.st.Stats(f.ctx, "signed")
		if err != nil || st.Pending != 1 {
			t.Fatalf("refused requests changed the queue: %+v, %v", st, err)
		}
	})
}

func TestUnsignedOnlyOnLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:9324": true, "localhost:0": true, "[::1]:9324": true,
		"0.0.0.0:9324": false, ":9324": false, "192.0.2.1:9324": false} {
		err := (serve.Config{Addr: addr}).Check()
		if (err == nil) != ok {
			t.Errorf("Check(%s) = %v, want ok %v", addr, err, ok)
		}
	}
	cfg := serve.Config{Addr: "0.0.0.0:9324", BehindTLSProxy: true}
	cfg.AccessKeyID, cfg.SecretAccessKey = testKey, testSecret
	if err := cfg.Check(); err != nil {
		t.Errorf("with credentials, Check(0.0.0.0:9324) = %v", err)
	}
}

// A redrive policy set after a message was sent holds when it is
// received; a receive with visibility 0 can still delete its message.
func TestLaterRedrivePolicyAndZeroVisibility(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("later", nil)
		f.send(url, "early", "")
		for range 2 {
			got := f.receive(url, 1, 30)
			if len(got) != 1 {
				t.Fatalf("received %v", bodies(got))
			}
			if _, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
				ReceiptHandle: aws.String(got[0].handle), VisibilityTimeout: 0}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
			Attributes: map[string]string{"RedrivePolicy": `{"maxReceiveCount":"2"}`}}); err != nil {
			t.Fatal(err)
		}
		if got := f.receive(url, 1, 30); len(got) != 0 {
			t.Fatalf("a third receive under maxReceiveCount 2 got %v", bodies(got))
		}
		dead, err := f.st.List(f.ctx, store.ListFilter{Queue: "later", State: store.Dead})
		if err != nil || len(dead) != 1 || dead[0].DeadReason != store.ReasonMaxDeliveries {
			t.Fatalf("dead letters %+v, %v", dead, err)
		}

		f.send(url, "quick", "")
		got := f.receive(url, 1, 0)
		if len(got) != 1 {
			t.Fatalf("received %v", bodies(got))
		}
		if err := f.delete(url, got[0].handle); err != nil {
			t.Fatalf("delete after a receive with visibility 0: %v", err)
		}
	})
}
