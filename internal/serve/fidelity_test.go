package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/leasehold/leasehold/internal/serve"
)

// uuid8 is the canonical text of a version 8 UUID of the RFC 9562
// variant.
var uuid8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// Message ids are UUIDs, the same on send and receive, that the
// database's mapping takes back to its message; the dashboard shows
// them. A FIFO queue's sequence numbers stay numbers.
func TestMessageIDsAreUUIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("ids", nil)
		one := f.send(url, "one", "")
		batch, err := f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.SendMessageBatchRequestEntry{
			{Id: aws.String("a"), MessageBody: aws.String("two")}, {Id: aws.String("b"), MessageBody: aws.String("three")}}})
		if err != nil {
			t.Fatal(err)
		}
		sent := []string{one, *batch.Successful[0].MessageId, *batch.Successful[1].MessageId}
		got := f.receive(url, 10, 30)
		if len(got) != 3 {
			t.Fatalf("received %d messages, want 3", len(got))
		}
		ids, err := serve.MessageIDs(f.ctx, f.st)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got {
			if !uuid8.MatchString(m.id) || !slices.Contains(sent, m.id) {
				t.Fatalf("received MessageId %q: not a UUID, or not one the sends gave (%v)", m.id, sent)
			}
			id, ok := ids.ID(m.id)
			if !ok {
				t.Fatalf("the database's mapping does not take %s back", m.id)
			}
			in, err := f.st.Get(f.ctx, id)
			if err != nil || string(in.Payload) != m.body {
				t.Fatalf("message %d of %s: %q, %v; want %q", id, m.id, in.Payload, err, m.body)
			}
			if code, page := get(t, f.url+"/queues/ids/messages/"+strconv.FormatInt(id, 10)); code != 200 || !strings.Contains(page, m.id) {
				t.Fatalf("the dashboard's page of message %d (%d) does not show %s", id, code, m.id)
			}
		}

		fifo := f.createQueue("ids.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
		out, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(fifo), MessageBody: aws.String("f"), MessageGroupId: aws.String("g")})
		if err != nil {
			t.Fatal(err)
		}
		if !uuid8.MatchString(*out.MessageId) || !regexp.MustCompile(`^[0-9]{20}$`).MatchString(*out.SequenceNumber) {
			t.Fatalf("FIFO send: MessageId %s, SequenceNumber %s", *out.MessageId, *out.SequenceNumber)
		}
	})
}

// On a standard queue a MessageGroupId orders nothing: the messages of a
// group are received together, each with its group.
func TestStandardQueueGroupsAreNotOrdered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("tenants", nil)
		for _, body := range []string{"a1", "a2", "a3"} {
			f.send(url, body, "a")
		}
		out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageGroupId"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) != 3 {
			t.Fatalf("received %d messages of one group at once, want all 3", len(out.Messages))
		}
		for _, m := range out.Messages {
			if m.Attributes["MessageGroupId"] != "a" {
				t.Fatalf("message %s: attributes %v, want MessageGroupId a", *m.Body, m.Attributes)
			}
		}
	})
}

// On a standard queue groups take turns: a quiet group's messages are
// received among the first, however long a noisy group's backlog.
func TestStandardQueueGroupsTakeTurns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("fair", nil)
		for i := range 30 {
			f.send(url, "noisy"+strconv.Itoa(i), "noisy")
			// Placement is by time, to the microsecond: sends in one
			// instant keep their order among themselves.
			f.clk.Advance(time.Millisecond)
		}
		f.send(url, "quiet1", "quiet")
		f.send(url, "quiet2", "quiet")
		var bodies []string
		for _, m := range f.receive(url, 4, 30) {
			bodies = append(bodies, m.body)
		}
		slices.Sort(bodies)
		if want := []string{"noisy0", "noisy1", "quiet1", "quiet2"}; !slices.Equal(bodies, want) {
			t.Fatalf("the first receive of 4 got %q, want %q: the noisy group's first two and the quiet group's two", bodies, want)
		}
	})
}

// The rules of queue attributes that Amazon SQS applies: booleans in any
// case, FIFO queues only by FifoQueue and a .fifo name together, FIFO
// attributes refused on standard queues, a queue's type fixed, and the
// defaults SQS shows.
func TestQueueAttributeRules(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		create := func(name string, attrs map[string]string) error {
			_, err := f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
			return err
		}
		wantCode(t, "a .fifo name without FifoQueue", create("a.fifo", nil), "InvalidParameterValue")
		wantCode(t, "FifoQueue false with a .fifo name", create("a.fifo", map[string]string{"FifoQueue": "false"}), "InvalidParameterValue")
		wantCode(t, "FifoQueue true without .fifo", create("a", map[string]string{"FifoQueue": "true"}), "InvalidParameterValue")
		wantCode(t, "FifoQueue false on a standard queue", create("a", map[string]string{"FifoQueue": "false"}), "InvalidAttributeName")
		for _, attr := range []string{"ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"} {
			value := map[string]string{"ContentBasedDeduplication": "true", "DeduplicationScope": "queue", "FifoThroughputLimit": "perQueue"}[attr]
			wantCode(t, attr+" on a standard queue", create("std-"+strings.ToLower(attr), map[string]string{attr: value}), "InvalidAttributeName")
		}
		wantCode(t, "a bad DeduplicationScope", create("b.fifo", map[string]string{"FifoQueue": "true", "DeduplicationScope": "tenant"}), "InvalidAttributeValue")

		fifo := f.createQueue("c.fifo", map[string]string{"FifoQueue": "TRUE", "ContentBasedDeduplication": "True"})
		a := f.attrs(fifo)
		for k, want := range map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true", "DeduplicationScope": "queue",
			"FifoThroughputLimit": "perQueue", "SqsManagedSseEnabled": "true"} {
			if a[k] != want {
				t.Errorf("FIFO queue: %s = %q, want %q", k, a[k], want)
			}
		}
		// Content-based deduplication is on, whatever the case it was given in.
		first := f.send(fifo, "same", "g")
		if again := f.send(fifo, "same", "g"); again != first {
			t.Fatalf("a second send of the same body gave %s, want %s", again, first)
		}
		if again := f.createQueue("c.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "TRUE"}); again != fifo {
			t.Fatalf("CreateQueue again with the same attributes in another case gave %s", again)
		}
		set := func(url string, attrs map[string]string) error {
			_, err := f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: attrs})
			return err
		}
		if err := set(fifo, map[string]string{"FifoQueue": "true"}); err != nil {
			t.Fatalf("SetQueueAttributes with the FifoQueue the queue has: %v", err)
		}
		wantCode(t, "FifoQueue changed", set(fifo, map[string]string{"FifoQueue": "false"}), "InvalidAttributeValue")
		if err := set(fifo, map[string]string{"FifoThroughputLimit": "perMessageGroupId", "DeduplicationScope": "messageGroup"}); err != nil {
			t.Fatal(err)
		}
		if a := f.attrs(fifo); a["FifoThroughputLimit"] != "perMessageGroupId" || a["DeduplicationScope"] != "messageGroup" {
			t.Fatalf("after setting the throughput mode: %v", a)
		}
		// Deduplication within each group, on a queue created so (see
		// TestDeduplicationScopeIsTheCreatedOne): the same body in
		// another group is another message.
		fifo = f.createQueue("scoped.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true",
			"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
		inG := f.send(fifo, "scoped", "g")
		if inH := f.send(fifo, "scoped", "h"); inH == inG {
			t.Fatalf("with DeduplicationScope messageGroup, the same body in two groups gave one message %s", inG)
		}
		if again := f.send(fifo, "scoped", "g"); again != inG {
			t.Fatalf("with DeduplicationScope messageGroup, the same body in one group gave %s, then %s", inG, again)
		}
		var scoped []types.Message
		for len(scoped) < 2 {
			out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(fifo), MaxNumberOfMessages: 10,
				MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageDeduplicationId", "MessageGroupId"}})
			if err != nil || len(out.Messages) == 0 {
				t.Fatalf("receive from the FIFO queue: %v, %v", out, err)
			}
			for _, m := range out.Messages {
				if *m.Body == "scoped" {
					scoped = append(scoped, m)
				}
				if _, err := f.c.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(fifo), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if d := scoped[0].Attributes["MessageDeduplicationId"]; len(d) != 64 || d != scoped[1].Attributes["MessageDeduplicationId"] {
			t.Fatalf("MessageDeduplicationId of the scoped messages: %v, %v", scoped[0].Attributes, scoped[1].Attributes)
		}

		std := f.createQueue("d", map[string]string{"SqsManagedSseEnabled": "FALSE"})
		a = f.attrs(std)
		if a["SqsManagedSseEnabled"] != "false" || a["FifoQueue"] != "" || a["DeduplicationScope"] != "" {
			t.Fatalf("standard queue: %v", a)
		}
		if a := f.attrs(f.createQueue("e", nil)); a["SqsManagedSseEnabled"] != "true" {
			t.Fatalf("a new queue shows SqsManagedSseEnabled %q, want true", a["SqsManagedSseEnabled"])
		}
		wantCode(t, "ContentBasedDeduplication set on a standard queue", set(std, map[string]string{"ContentBasedDeduplication": "false"}), "InvalidAttributeName")
		wantCode(t, "FifoQueue set on a standard queue", set(std, map[string]string{"FifoQueue": "false"}), "InvalidAttributeName")
		wantCode(t, "a Policy that is not JSON", set(std, map[string]string{"Policy": "{"}), "InvalidAttributeValue")

		// A FIFO queue takes DelaySeconds 0 on a send, and no other.
		_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(fifo), MessageBody: aws.String("d0"),
			MessageGroupId: aws.String("g"), DelaySeconds: 0})
		if err != nil {
			t.Fatalf("DelaySeconds 0 on a FIFO queue: %v", err)
		}
		_, err = f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(fifo), MessageBody: aws.String("d5"),
			MessageGroupId: aws.String("g"), DelaySeconds: 5})
		wantCode(t, "DelaySeconds 5 on a FIFO queue", err, "InvalidParameterValue")
	})
}

// A FIFO queue deduplicates by the DeduplicationScope it was created
// with, as Amazon SQS does: a scope set later is shown, and changes
// nothing, either way.
func TestDeduplicationScopeIsTheCreatedOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		send := func(url, body, group, dedup string) {
			t.Helper()
			if _, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
				MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)}); err != nil {
				t.Fatalf("SendMessage %s: %v", body, err)
			}
		}
		drain := func(url string) []string {
			t.Helper()
			got := f.receive(url, 10, 30)
			for _, m := range got {
				if err := f.delete(url, m.handle); err != nil {
					t.Fatal(err)
				}
			}
			return bodies(got)
		}
		set := func(url, scope, limit string) {
			t.Helper()
			if _, err := f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
				Attributes: map[string]string{"DeduplicationScope": scope, "FifoThroughputLimit": limit}}); err != nil {
				t.Fatal(err)
			}
			if a := f.attrs(url); a["DeduplicationScope"] != scope || a["FifoThroughputLimit"] != limit {
				t.Fatalf("after SetQueueAttributes %s, %s: %v", scope, limit, a)
			}
		}

		byQueue := f.createQueue("by-queue.fifo", map[string]string{"FifoQueue": "true", "DeduplicationScope": "queue"})
		send(byQueue, "one", "g1", "same")
		send(byQueue, "two", "g2", "same")
		if got := drain(byQueue); !slices.Equal(got, []string{"one"}) {
			t.Fatalf("scope queue: received %v, want [one]", got)
		}
		set(byQueue, "messageGroup", "perMessageGroupId")
		send(byQueue, "three", "g3", "same")
		send(byQueue, "four", "g4", "other")
		send(byQueue, "five", "g5", "other")
		if got := drain(byQueue); !slices.Equal(got, []string{"four"}) {
			t.Fatalf("created with scope queue, set to messageGroup: received %v, want [four]", got)
		}

		byGroup := f.createQueue("by-group.fifo", map[string]string{"FifoQueue": "true", "DeduplicationScope": "messageGroup",
			"FifoThroughputLimit": "perMessageGroupId"})
		send(byGroup, "one", "g1", "same")
		send(byGroup, "two", "g2", "same")
		set(byGroup, "queue", "perQueue")
		send(byGroup, "three", "g3", "same")
		send(byGroup, "again", "g1", "same")
		if got := drain(byGroup); !slices.Equal(got, []string{"one", "two", "three"}) {
			t.Fatalf("created with scope messageGroup, set to queue: received %v, want [one two three]", got)
		}

		// A record an earlier version wrote holds no created scope: the
		// queue keeps the scope it had when it is first changed.
		if _, _, err := f.st.CreateQueue(f.ctx, "earlier.fifo", map[string]string{"FifoQueue": "true",
			"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}); err != nil {
			t.Fatal(err)
		}
		earlier := strings.Replace(byGroup, "by-group.fifo", "earlier.fifo", 1)
		set(earlier, "queue", "perQueue")
		send(earlier, "one", "g1", "same")
		send(earlier, "two", "g2", "same")
		set(earlier, "messageGroup", "perMessageGroupId")
		send(earlier, "three", "g3", "same")
		if got := drain(earlier); !slices.Equal(got, []string{"one", "two", "three"}) {
			t.Fatalf("an earlier record of scope messageGroup, set to queue: received %v, want [one two three]", got)
		}
	})
}

// Message attributes are selected as SQS selects them (All, *, .*, a
// prefix.* that matches every name starting with the prefix, names), their names may hold letters of any script, and the
// system attributes take All and .* too.
func TestMessageAttributeSelection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("attrs", nil)
		str := func(v string) types.MessageAttributeValue {
			return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("m"),
			MessageAttributes: map[string]types.MessageAttributeValue{"a.x": str("1"), "a.y": str("2"), "b": str("3"), "größe.日本": str("4")}})
		if err != nil {
			t.Fatalf("SendMessage with a name of non-ASCII letters: %v", err)
		}
		_, err = f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("bad"),
			MessageAttributes: map[string]types.MessageAttributeValue{"a b": str("1")}})
		wantCode(t, "an attribute name with a space", err, "InvalidParameterValue")
		for _, tc := range []struct {
			names []string
			want  []string
		}{
			{[]string{"All"}, []string{"a.x", "a.y", "b", "größe.日本"}},
			{[]string{".*"}, []string{"a.x", "a.y", "b", "größe.日本"}},
			{[]string{"*"}, []string{"a.x", "a.y", "b", "größe.日本"}},
			{[]string{"a.*"}, []string{"a.x", "a.y"}},
			{[]string{"gr.*"}, []string{"größe.日本"}},
			{[]string{"b", "größe.*"}, []string{"b", "größe.日本"}},
			{[]string{"c"}, nil},
		} {
			out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MessageAttributeNames: tc.names,
				MessageSystemAttributeNames: []types.MessageSystemAttributeName{".*"}, VisibilityTimeout: 0})
			if err != nil || len(out.Messages) != 1 {
				t.Fatalf("receive %v: %v, %v", tc.names, out, err)
			}
			m := out.Messages[0]
			var got []string
			for k := range m.MessageAttributes {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("MessageAttributeNames %v gave %v, want %v", tc.names, got, tc.want)
			}
			if m.Attributes["SentTimestamp"] == "" || m.Attributes["SenderId"] == "" {
				t.Errorf("MessageSystemAttributeNames .* gave %v", m.Attributes)
			}
			if _, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A message sent without an AWSTraceHeader takes the request's
// X-Amzn-Trace-Id; SenderId is the access key id that signed the send,
// or the account id on a server that does not check signatures.
func TestTraceHeaderAndSenderID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, signed := range []bool{false, true} {
			f := setup(t, b, options{signed: signed})
			url := f.createQueue("traced", nil)
			trace := "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
			withTrace := func(o *sqs.Options) {
				o.APIOptions = append(o.APIOptions, smithyhttp.SetHeaderValue("X-Amzn-Trace-Id", trace))
			}
			if _, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("from header")}, withTrace); err != nil {
				t.Fatal(err)
			}
			_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("own"),
				MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=own")}}}, withTrace)
			if err != nil {
				t.Fatal(err)
			}
			out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
				MessageSystemAttributeNames: []types.MessageSystemAttributeName{"AWSTraceHeader", "SenderId"}})
			if err != nil || len(out.Messages) != 2 {
				t.Fatalf("receive: %v, %v", out, err)
			}
			sender := "000000000000"
			if signed {
				sender = testKey
			}
			for _, m := range out.Messages {
				want := map[string]string{"from header": trace, "own": "Root=own"}[*m.Body]
				if m.Attributes["AWSTraceHeader"] != want || m.Attributes["SenderId"] != sender {
					t.Errorf("signed %v, message %q: attributes %v, want AWSTraceHeader %q and SenderId %s", signed, *m.Body, m.Attributes, want, sender)
				}
			}
		}
	})
}

// A tag with an empty value is a tag.
func TestEmptyTagValueIsKept(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		out, err := f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String("tagged"), Tags: map[string]string{"created": ""}})
		if err != nil {
			t.Fatal(err)
		}
		url := out.QueueUrl
		if _, err := f.c.TagQueue(f.ctx, &sqs.TagQueueInput{QueueUrl: url, Tags: map[string]string{"flag": "", "team": "a"}}); err != nil {
			t.Fatal(err)
		}
		tags, err := f.c.ListQueueTags(f.ctx, &sqs.ListQueueTagsInput{QueueUrl: url})
		if err != nil || len(tags.Tags) != 3 {
			t.Fatalf("ListQueueTags = %v, %v; want created, flag and team", tags.Tags, err)
		}
		if v, ok := tags.Tags["flag"]; !ok || v != "" {
			t.Fatalf("tag flag: %q, %v", v, ok)
		}
		if _, err := f.c.UntagQueue(f.ctx, &sqs.UntagQueueInput{QueueUrl: url, TagKeys: []string{"flag", "created"}}); err != nil {
			t.Fatal(err)
		}
		tags, err = f.c.ListQueueTags(f.ctx, &sqs.ListQueueTagsInput{QueueUrl: url})
		if err != nil || len(tags.Tags) != 1 || tags.Tags["team"] != "a" {
			t.Fatalf("after UntagQueue: %v, %v", tags.Tags, err)
		}
		if a := f.attrs(*url); len(a) == 0 || a["tagv:team"] != "" || a["team"] != "" {
			t.Fatalf("tags show among the attributes: %v", a)
		}
	})
}

// policyDoc is the part of an IAM policy document the tests read.
type policyDoc struct {
	Version   string
	Statement []struct {
		Sid       string
		Effect    string
		Principal struct{ AWS any }
		Action    any
		Resource  string
	}
}

// AddPermission and RemovePermission keep the queue's Policy as SQS does:
// a statement per label.
func TestPermissions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("shared", nil)
		add := func(label string, accounts, actions []string) error {
			_, err := f.c.AddPermission(f.ctx, &sqs.AddPermissionInput{QueueUrl: aws.String(url), Label: aws.String(label), AWSAccountIds: accounts, Actions: actions})
			return err
		}
		remove := func(label string) error {
			_, err := f.c.RemovePermission(f.ctx, &sqs.RemovePermissionInput{QueueUrl: aws.String(url), Label: aws.String(label)})
			return err
		}
		read := func() policyDoc {
			t.Helper()
			var p policyDoc
			if err := json.Unmarshal([]byte(f.attrs(url)["Policy"]), &p); err != nil {
				t.Fatalf("Policy %q: %v", f.attrs(url)["Policy"], err)
			}
			return p
		}
		if err := add("send", []string{"111122223333"}, []string{"SendMessage"}); err != nil {
			t.Fatal(err)
		}
		if err := add("work", []string{"111122223333", "444455556666"}, []string{"ReceiveMessage", "DeleteMessage"}); err != nil {
			t.Fatal(err)
		}
		arn := f.attrs(url)["QueueArn"]
		p := read()
		if p.Version != "2008-10-17" || len(p.Statement) != 2 {
			t.Fatalf("policy %+v", p)
		}
		s := p.Statement[0]
		if s.Sid != "send" || s.Effect != "Allow" || s.Principal.AWS != "arn:aws:iam::111122223333:root" || s.Action != "SQS:SendMessage" || s.Resource != arn {
			t.Fatalf("first statement %+v", s)
		}
		if s := p.Statement[1]; s.Sid != "work" || len(s.Principal.AWS.([]any)) != 2 || len(s.Action.([]any)) != 2 {
			t.Fatalf("second statement %+v", s)
		}
		wantCode(t, "a label again", add("send", []string{"111122223333"}, []string{"SendMessage"}), "InvalidParameterValue")
		wantCode(t, "an account id that is none", add("x", []string{"1234"}, []string{"SendMessage"}), "InvalidParameterValue")
		wantCode(t, "an action that is not shared", add("x", []string{"111122223333"}, []string{"DeleteQueue"}), "InvalidParameterValue")
		wantCode(t, "no label", add("", []string{"111122223333"}, []string{"SendMessage"}), "MissingParameter")
		wantCode(t, "a label not in the policy", remove("nope"), "InvalidParameterValue")
		if len(read().Statement) != 2 {
			t.Fatal("a refused permission changed the policy")
		}
		if err := remove("send"); err != nil {
			t.Fatal(err)
		}
		if p := read(); len(p.Statement) != 1 || p.Statement[0].Sid != "work" {
			t.Fatalf("after RemovePermission send: %+v", p)
		}
		if err := remove("work"); err != nil {
			t.Fatal(err)
		}
		if pol, ok := f.attrs(url)["Policy"]; ok {
			t.Fatalf("a policy without statements is still shown: %q", pol)
		}
	})
}

// rawCall sends one unsigned request of the JSON protocol.
func rawCall(t *testing.T, f *fixture, action, body string) (int, http.Header, string) {
	t.Helper()
	code, answer, h := do(t, http.MethodPost, f.url+"/", func(req *http.Request) {
		req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
	})
	return code, h, answer
}

// Empty lists are left out of answers, as SQS's JSON protocol leaves
// them, and errors carry SQS's shape and code.
func TestAnswersAsSQSWritesThem(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		if code, _, body := rawCall(t, f, "ListQueues", "{}"); code != 200 || strings.TrimSpace(body) != "{}" {
			t.Fatalf("ListQueues of no queues: %d %s", code, body)
		}
		url := f.createQueue("lists", nil)
		_, _, body := rawCall(t, f, "SendMessageBatch", `{"QueueUrl":"`+url+`","Entries":[{"Id":"a","MessageBody":"x"}]}`)
		if strings.Contains(body, "Failed") || !strings.Contains(body, "Successful") {
			t.Fatalf("SendMessageBatch that succeeded: %s", body)
		}
		_, _, body = rawCall(t, f, "DeleteMessageBatch", `{"QueueUrl":"`+url+`","Entries":[{"Id":"a","ReceiptHandle":"nope"}]}`)
		if strings.Contains(body, "Successful") || !strings.Contains(body, "ReceiptHandleIsInvalid") {
			t.Fatalf("DeleteMessageBatch that failed: %s", body)
		}
		code, h, body := rawCall(t, f, "GetQueueUrl", `{"QueueName":"missing"}`)
		var e struct {
			Type string `json:"__type"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != 400 || e.Type != "com.amazonaws.sqs#QueueDoesNotExist" ||
			h.Get("X-Amzn-Query-Error") != "AWS.SimpleQueueService.NonExistentQueue;Sender" {
			t.Fatalf("GetQueueUrl of a missing queue: %d %v %s", code, h, body)
		}
	})
}

// A queue's ARN names the region its request was signed for; the queue
// is one whatever the region.
func TestARNsCarryTheSignedRegion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{signed: true})
		url := f.createQueue("regional", nil)
		eu := sqs.New(sqs.Options{BaseEndpoint: aws.String(f.url), Region: "eu-west-1", RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(testKey, testSecret, "")})
		out, err := eu.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"QueueArn"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Attributes["QueueArn"]; got != "arn:aws:sqs:eu-west-1:000000000000:regional" {
			t.Fatalf("QueueArn signed for eu-west-1: %s", got)
		}
		if got := f.attrs(url)["QueueArn"]; got != "arn:aws:sqs:us-east-1:000000000000:regional" {
			t.Fatalf("QueueArn signed for us-east-1: %s", got)
		}
	})
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{adjust: func(c *serve.Config) { c.Region = "ap-south-1" }})
		url := f.createQueue("unsigned", nil)
		anonymous := f.client("", "")
		out, err := anonymous.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"QueueArn"}})
		if err != nil || out.Attributes["QueueArn"] != "arn:aws:sqs:ap-south-1:000000000000:unsigned" {
			t.Fatalf("QueueArn of an unsigned request: %v, %v", out, err)
		}
	})
}

// errorLines counts the ERROR lines a logger is given.
type errorLines struct {
	mu sync.Mutex
	n  int
}

func (e *errorLines) Enabled(context.Context, slog.Level) bool { return true }
func (e *errorLines) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		e.mu.Lock()
		e.n++
		e.mu.Unlock()
	}
	return nil
}
func (e *errorLines) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e *errorLines) WithGroup(string) slog.Handler      { return e }

func (e *errorLines) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// A long poll whose client closes its connection is no error: no ERROR
// line, and the request is counted as cancelled.
func TestAbandonedLongPollIsNoError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		lines := &errorLines{}
		f := setup(t, b, options{adjust: func(c *serve.Config) { c.Logger = slog.New(lines) }})
		url := f.createQueue("patient", nil)
		before := f.clk.Waiters()
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan error, 1)
		go func() {
			_, err := f.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
			done <- err
		}()
		// The long poll waits on the server's clock: then the client
		// gives up and closes its connection.
		if err := f.clk.BlockUntil(f.ctx, before+1); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err == nil {
			t.Fatal("a cancelled ReceiveMessage returned no error to its client")
		}
		// The server learns of the closed connection on its own time:
		// the count of the request tells when it has.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, body := get(t, f.url+"/metrics")
			if hasSample(body, []string{"leasehold_sqs_requests_total{", `action="ReceiveMessage"`}) {
				if !hasSample(body, []string{"leasehold_sqs_requests_total{", `action="ReceiveMessage"`, `outcome="cancelled"`, "} 1"}) {
					t.Fatalf("the abandoned long poll was not counted as cancelled:\n%s", body)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no ReceiveMessage counted within 30 s:\n%s", body)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n := lines.count(); n != 0 {
			t.Fatalf("%d ERROR lines for an abandoned long poll", n)
		}
	})
}

// A message's system attributes do not count towards its size, as in SQS;
// its message attributes do.
func TestSystemAttributesAreNotCountedInSize(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("small", map[string]string{"MaximumMessageSize": "1024"})
		body := strings.Repeat("x", 1024)
		_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
			MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-5759e988-bd862e3fe1be46a994272793")}}})
		if err != nil {
			t.Fatalf("a message of MaximumMessageSize with AWSTraceHeader: %v", err)
		}
		_, err = f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("String"), StringValue: aws.String("1")}}})
		wantCode(t, "a message of MaximumMessageSize with a message attribute", err, "InvalidParameterValue")
	})
}

// Errors carry Amazon SQS's codes and texts, word for word, so that a
// client or a test that matches on them finds what Amazon sends.
func TestErrorTextsAreAmazons(t *testing.T) {
	f := setup(t, backends()[0], options{})
	url := aws.String(f.createQueue("texts", nil))
	fifo := aws.String(f.createQueue("texts.fifo", map[string]string{"FifoQueue": "true"}))
	entries := make([]types.SendMessageBatchRequestEntry, 20)
	for i := range entries {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String("m")}
	}
	if _, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: url})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v, %v", out, err)
	}
	deleted := out.Messages[0].ReceiptHandle
	if _, err := f.c.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: deleted}); err != nil {
		t.Fatal(err)
	}
	_, changeErr := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: url, ReceiptHandle: deleted, VisibilityTimeout: 5})
	for _, tc := range []struct {
		what, code, text string
		err              error
	}{
		{"MaxNumberOfMessages 11", "InvalidParameterValue", "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.",
			func() error {
				_, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 11})
				return err
			}()},
		{"WaitTimeSeconds 21", "InvalidParameterValue", "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
			func() error {
				_, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 21})
				return err
			}()},
		{"twenty entries", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent 20.",
			func() error {
				_, err := f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: entries})
				return err
			}()},
		{"a bad entry id", "AWS.SimpleQueueService.InvalidBatchEntryId", "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
			func() error {
				_, err := f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: url,
					Entries: []types.SendMessageBatchRequestEntry{{Id: aws.String("message:x"), MessageBody: aws.String("m")}}})
				return err
			}()},
		{"a missing queue", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.",
			func() error {
				_, err := f.c.GetQueueUrl(f.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
				return err
			}()},
		{"a garbage handle", "ReceiptHandleIsInvalid", `The input receipt handle "garbage" is not a valid receipt handle.`,
			func() error {
				_, err := f.c.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: aws.String("garbage")})
				return err
			}()},
		{"a FIFO send without a group", "MissingParameter", "The request must contain the parameter MessageGroupId.",
			func() error {
				_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: fifo, MessageBody: aws.String("m"), MessageDeduplicationId: aws.String("d")})
				return err
			}()},
		{"a FIFO send without a deduplication id", "InvalidParameterValue", "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
			func() error {
				_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: fifo, MessageBody: aws.String("m"), MessageGroupId: aws.String("g")})
				return err
			}()},
		{"a FIFO batch entry without a group", "InvalidParameterValue", "The request must contain the parameter MessageGroupId.",
			func() error {
				_, err := f.c.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: fifo, Entries: []types.SendMessageBatchRequestEntry{
					{Id: aws.String("a"), MessageBody: aws.String("m"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("1")},
					{Id: aws.String("b"), MessageBody: aws.String("m"), MessageDeduplicationId: aws.String("2")}}})
				return err
			}()},
		{"a visibility change after the delete", "InvalidParameterValue",
			"Value " + *deleted + " for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.",
			changeErr},
		{"a body too long", "InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.",
			func() error {
				_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(strings.Repeat("x", 1<<20+1))})
				return err
			}()},
		{"an empty attribute", "InvalidParameterValue", "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'.",
			func() error {
				_, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("m"),
					MessageAttributes: map[string]types.MessageAttributeValue{"ErrorDetails": {DataType: aws.String("String"), StringValue: aws.String("")}}})
				return err
			}()},
	} {
		wantCode(t, tc.what, tc.err, tc.code)
		var ae smithy.APIError
		if errors.As(tc.err, &ae); ae.ErrorMessage() != tc.text {
			t.Errorf("%s: message %q, want %q", tc.what, ae.ErrorMessage(), tc.text)
		}
	}
}
