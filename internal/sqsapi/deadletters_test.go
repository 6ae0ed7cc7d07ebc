package sqsapi

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// durable is a database that outlives its stores: database makes a new
// one and returns how to open a store on it, again after the last one
// closed, as a restarted server does.
type durable struct {
	name     string
	database func(t *testing.T, clk clock.Clock) func() (store.Store, error)
}

// forEachDurable runs test on a fixture of each durable database.
func forEachDurable(t *testing.T, test func(t *testing.T, f *dlqFixture)) {
	for _, d := range durables() {
		t.Run(d.name, func(t *testing.T) { test(t, newDLQFixture(t, d)) })
	}
}

func durables() []durable {
	return []durable{
		{"sqlite", func(t *testing.T, clk clock.Clock) func() (store.Store, error) {
			path := filepath.Join(t.TempDir(), "q.db")
			return func() (store.Store, error) {
				return sqlite.Open(context.Background(), sqlite.Config{Path: path, Clock: clk})
			}
		}},
		{"postgres", func(t *testing.T, clk clock.Clock) func() (store.Store, error) {
			pool := pgtest.Pool(t)
			schema := pgtest.Schema(t, pool)
			return func() (store.Store, error) {
				return postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: schema, Clock: clk})
			}
		}},
	}
}

// dlqFixture is an API on a durable store and a fake clock, served by
// httptest with its move tasks running, and an SDK client of it.
type dlqFixture struct {
	t    *testing.T
	ctx  context.Context
	clk  *clocktest.Clock
	open func() (store.Store, error)
	st   store.Store
	api  *API
	c    *sqs.Client
	stop func()
}

func newDLQFixture(t *testing.T, d durable) *dlqFixture {
	t.Helper()
	clk := clocktest.New()
	if err := clk.SetWall(time.Now().UTC().Round(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	f := &dlqFixture{t: t, ctx: context.Background(), clk: clk, open: d.database(t, clk)}
	f.start()
	return f
}

// start opens a store, serves an API of it and runs its move tasks.
func (f *dlqFixture) start() {
	f.t.Helper()
	st, err := f.open()
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { st.Close() })
	a, err := New(Config{Store: st, ReceiptKey: []byte("a receipt key of thirty-two bytes!"), MessageIDs: testIDs(f.t), Clock: f.clk,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.t.Fatal(err)
	}
	hs := httptest.NewServer(a)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.RunMoveTasks(ctx) }()
	f.stop = func() {
		cancel()
		if err := <-ran; err != nil {
			f.t.Error(err)
		}
		hs.Close()
	}
	f.t.Cleanup(func() {
		if f.api == a {
			f.stop()
		}
	})
	f.st, f.api = st, a
	f.c = sqs.New(sqs.Options{BaseEndpoint: aws.String(hs.URL), Region: "us-east-1", Credentials: aws.AnonymousCredentials{},
		RetryMaxAttempts: 1, HTTPClient: &http.Client{}})
}

// restart stops the API and its store, and starts new ones on the same
// database.
func (f *dlqFixture) restart() {
	f.t.Helper()
	f.stop()
	if err := f.st.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.start()
}

func arn(name string) string { return "arn:aws:sqs:us-east-1:000000000000:" + name }

func (f *dlqFixture) create(name string, attrs map[string]string) string {
	f.t.Helper()
	out, err := f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		f.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return *out.QueueUrl
}

func redrive(target string, max int) map[string]string {
	return map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn(target) + `","maxReceiveCount":"` + strconv.Itoa(max) + `"}`}
}

func (f *dlqFixture) send(url string, bodies ...string) {
	f.t.Helper()
	for _, b := range bodies {
		if _, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b)}); err != nil {
			f.t.Fatalf("SendMessage: %v", err)
		}
	}
}

func (f *dlqFixture) receive(url string, max int32) []types.Message {
	f.t.Helper()
	out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: max,
		VisibilityTimeout: 30, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}, MessageAttributeNames: []string{"All"}})
	if err != nil {
		f.t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

// reap lets every lease run out and reaps.
func (f *dlqFixture) reap() {
	f.t.Helper()
	f.clk.Advance(31 * time.Second)
	if _, err := f.st.Reap(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

func (f *dlqFixture) depth(url string) string {
	f.t.Helper()
	out, err := f.c.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
	if err != nil {
		f.t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"]
}

// drain receives and deletes every message of a queue and returns their
// bodies, sorted.
func (f *dlqFixture) drain(url string) []string {
	f.t.Helper()
	var got []string
	for {
		ms := f.receive(url, 10)
		if len(ms) == 0 {
			slices.Sort(got)
			return got
		}
		for _, m := range ms {
			got = append(got, *m.Body)
			if _, err := f.c.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

func wantAPIError(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// wantRefused fails unless err is an API error of status, code and text
// msg.
func wantRefused(t *testing.T, what string, err error, status int, code, msg string) {
	t.Helper()
	var ae smithy.APIError
	var re *awshttp.ResponseError
	if !errors.As(err, &ae) || !errors.As(err, &re) || ae.ErrorCode() != code || ae.ErrorMessage() != msg || re.HTTPStatusCode() != status {
		t.Fatalf("%s: %v\nwant %d %s %q", what, err, status, code, msg)
	}
}

// A message received maxReceiveCount times without a delete moves to the
// policy's dead-letter queue, whole: body, attributes, first sent time,
// and its receive count and first receive time, which Amazon SQS keeps
// (a message dead-lettered after two receives is received there a third
// time); there it names its source. The reaper moves it when its last
// lease runs out; a policy set after it was sent moves it at the receive
// past the policy's count.
func TestDeadLetterQueueThroughTheAPI(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		dlq := f.create("dlq", nil)
		src := f.create("src", redrive("dlq", 2))
		if _, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String("poison"),
			MessageAttributes: map[string]types.MessageAttributeValue{"colour": {DataType: aws.String("String"), StringValue: aws.String("red")}}}); err != nil {
			t.Fatal(err)
		}
		var first types.Message
		for i := range 2 {
			ms := f.receive(src, 1)
			if len(ms) != 1 {
				t.Fatalf("receive %d got %d messages", i+1, len(ms))
			}
			first = cmpFirst(first, ms[0])
			f.reap()
		}
		if got := f.receive(src, 10); len(got) != 0 {
			t.Fatalf("the source still gives %d messages", len(got))
		}
		if n := f.depth(dlq); n != "1" {
			t.Fatalf("dead-letter queue depth %s, want 1", n)
		}
		if n := f.depth(src); n != "0" {
			t.Fatalf("source depth %s, want 0", n)
		}
		ms := f.receive(dlq, 10)
		if len(ms) != 1 {
			t.Fatalf("dead-letter queue gave %d messages, want 1", len(ms))
		}
		m := ms[0]
		if *m.Body != "poison" || *m.MessageAttributes["colour"].StringValue != "red" || *m.MessageId != *first.MessageId ||
			m.Attributes["SentTimestamp"] != first.Attributes["SentTimestamp"] || m.Attributes["ApproximateReceiveCount"] != "3" ||
			m.Attributes["ApproximateFirstReceiveTimestamp"] != first.Attributes["ApproximateFirstReceiveTimestamp"] ||
			m.Attributes["DeadLetterQueueSourceArn"] != arn("src") {
			t.Fatalf("dead letter %+v / %v; sent as %+v / %v", m, m.Attributes, first, first.Attributes)
		}
		_, err := f.c.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(src), ReceiptHandle: first.ReceiptHandle})
		wantAPIError(t, "delete with the source's handle", err, "ReceiptHandleIsInvalid")
		if _, err := f.c.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlq), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatalf("delete from the dead-letter queue: %v", err)
		}

		// A policy set after the send: the receive past its count
		// moves the message.
		later := f.create("later", nil)
		f.send(later, "early")
		for range 2 {
			ms := f.receive(later, 1)
			if len(ms) != 1 {
				t.Fatalf("received %d", len(ms))
			}
			if _, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(later),
				ReceiptHandle: ms[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(later), Attributes: redrive("dlq", 2)}); err != nil {
			t.Fatal(err)
		}
		if got := f.receive(later, 10); len(got) != 0 {
			t.Fatalf("a third receive under maxReceiveCount 2 got %d", len(got))
		}
		// The receive that moved it is not counted: it arrives with the
		// two it had.
		if ms := f.receive(dlq, 10); len(ms) != 1 || *ms[0].Body != "early" || ms[0].Attributes["ApproximateReceiveCount"] != "3" {
			t.Fatalf("dead-letter queue gave %+v, want early received a third time", ms)
		}
	})
}

// A queue may be its own dead-letter queue, as in SQS: the policy is
// taken, the queue lists itself as its source, and a message past its
// maxReceiveCount stays dead in the queue, received no more.
func TestQueueIsItsOwnDeadLetterQueue(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		self := f.create("self", nil)
		if _, err := f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(self), Attributes: redrive("self", 1)}); err != nil {
			t.Fatalf("SetQueueAttributes naming the queue itself: %v", err)
		}
		srcs, err := f.c.ListDeadLetterSourceQueues(f.ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(self)})
		if err != nil || !slices.Equal(srcs.QueueUrls, []string{self}) {
			t.Fatalf("ListDeadLetterSourceQueues = %+v, %v; want the queue itself", srcs, err)
		}
		f.send(self, "poison")
		if ms := f.receive(self, 10); len(ms) != 1 {
			t.Fatalf("first receive got %d messages", len(ms))
		}
		f.reap()
		if ms := f.receive(self, 10); len(ms) != 0 {
			t.Fatalf("a message past its maxReceiveCount was received again: %d", len(ms))
		}
		dead, err := store.ListDeadLetters(f.ctx, f.st, "self", 0, 10)
		if err != nil || len(dead) != 1 || string(dead[0].Payload) != "poison" {
			t.Fatalf("dead letters of the queue: %+v, %v", dead, err)
		}
	})
}

// cmpFirst keeps the first message received.
func cmpFirst(first, m types.Message) types.Message {
	if first.MessageId == nil {
		return m
	}
	return first
}

// A redrive policy names an existing queue of this server (a queue
// being created is none yet), of the same kind; ListDeadLetterSourceQueues lists, in pages, the
// queues whose policy names the queue now.
func TestListDeadLetterSourceQueues(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		dlq := f.create("dlq", nil)
		f.create("other", nil)
		f.create("dlq.fifo", map[string]string{"FifoQueue": "true"})
		for _, c := range []struct {
			name   string
			policy string
		}{
			{"to-missing", `{"deadLetterTargetArn":"` + arn("missing") + `","maxReceiveCount":1}`},
			{"to-itself", `{"deadLetterTargetArn":"` + arn("to-itself") + `","maxReceiveCount":1}`},
			{"to-fifo", `{"deadLetterTargetArn":"` + arn("dlq.fifo") + `","maxReceiveCount":1}`},
			{"to-elsewhere", `{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:111111111111:dlq","maxReceiveCount":1}`},
		} {
			_, err := f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String(c.name), Attributes: map[string]string{"RedrivePolicy": c.policy}})
			wantAPIError(t, "CreateQueue "+c.name, err, "InvalidAttributeValue")
		}
		for _, n := range []string{"c", "a", "b"} {
			f.create(n, redrive("dlq", 3))
		}
		f.create("d", redrive("other", 3))
		b, err := f.c.GetQueueUrl(f.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("b")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: b.QueueUrl, Attributes: redrive("other", 3)}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.DeleteQueue(f.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(f.create("e", redrive("dlq", 1)))}); err != nil {
			t.Fatal(err)
		}
		all, err := f.c.ListDeadLetterSourceQueues(f.ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlq)})
		if err != nil || len(all.QueueUrls) != 2 || all.NextToken != nil || !hasSuffixes(all.QueueUrls, "/a", "/c") {
			t.Fatalf("ListDeadLetterSourceQueues = %+v, %v; want a and c", all, err)
		}
		page, err := f.c.ListDeadLetterSourceQueues(f.ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlq), MaxResults: aws.Int32(1)})
		if err != nil || !hasSuffixes(page.QueueUrls, "/a") || page.NextToken == nil {
			t.Fatalf("page 1 = %+v, %v", page, err)
		}
		page, err = f.c.ListDeadLetterSourceQueues(f.ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlq), MaxResults: aws.Int32(1), NextToken: page.NextToken})
		if err != nil || !hasSuffixes(page.QueueUrls, "/c") || page.NextToken != nil {
			t.Fatalf("page 2 = %+v, %v", page, err)
		}
		_, err = f.c.ListDeadLetterSourceQueues(f.ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlq), MaxResults: aws.Int32(0)})
		wantAPIError(t, "MaxResults 0", err, "InvalidParameterValue")
		// The record's bookkeeping stays out of sight.
		attrs, err := f.c.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for k := range attrs.Attributes {
			if len(k) > len(internalPrefix) && k[:len(internalPrefix)] == internalPrefix {
				t.Fatalf("GetQueueAttributes shows %s", k)
			}
		}
	})
}

func hasSuffixes(urls []string, suffixes ...string) bool {
	if len(urls) != len(suffixes) {
		return false
	}
	for i, s := range suffixes {
		if len(urls[i]) < len(s) || urls[i][len(urls[i])-len(s):] != s {
			return false
		}
	}
	return true
}

// deadLetters sends bodies to src, whose policy has maxReceiveCount 1,
// and receives them once each without a delete: the reaper moves them to
// its dead-letter queue.
func (f *dlqFixture) deadLetters(src string, bodies ...string) {
	f.t.Helper()
	f.send(src, bodies...)
	for n := 0; n < len(bodies); {
		n += len(f.receive(src, 10))
	}
	f.reap()
}

func (f *dlqFixture) tasks(source string, max int32) []types.ListMessageMoveTasksResultEntry {
	f.t.Helper()
	out, err := f.c.ListMessageMoveTasks(f.ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(arn(source)), MaxResults: aws.Int32(max)})
	if err != nil {
		f.t.Fatalf("ListMessageMoveTasks: %v", err)
	}
	return out.Results
}

func wantTask(t *testing.T, e types.ListMessageMoveTasksResultEntry, status string, moved, toMove int64) {
	t.Helper()
	if aws.ToString(e.Status) != status || e.ApproximateNumberOfMessagesMoved != moved || aws.ToInt64(e.ApproximateNumberOfMessagesToMove) != toMove {
		t.Fatalf("task %s, moved %d of %d; want %s, %d of %d", aws.ToString(e.Status), e.ApproximateNumberOfMessagesMoved,
			aws.ToInt64(e.ApproximateNumberOfMessagesToMove), status, moved, toMove)
	}
}

// Message move tasks: back to the queues the messages came from, to a
// named queue, at a rate on the clock, cancelled midway; and the errors of
// the three actions.
func TestMessageMoveTasks(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		dlq := f.create("dlq", nil)
		src := f.create("src", redrive("dlq", 1))
		src2 := f.create("src2", redrive("dlq", 1))
		dest := f.create("dest", nil)
		f.create("plain", nil)

		_, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("plain"))})
		wantAPIError(t, "a task from a queue that is no dead-letter queue", err, "InvalidParameterValue")
		_, err = f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("missing"))})
		wantRefused(t, "a task from a missing queue", err, 404, "ResourceNotFoundException",
			"The resource that you specified for the SourceArn parameter doesn't exist.")
		_, err = f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq")), DestinationArn: aws.String(arn("missing"))})
		wantRefused(t, "a task to a missing queue", err, 404, "ResourceNotFoundException",
			"The resource that you specified for the DestinationArn parameter doesn't exist.")
		_, err = f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq")), MaxNumberOfMessagesPerSecond: aws.Int32(501)})
		wantAPIError(t, "a rate of 501", err, "InvalidParameterValue")
		if got := f.tasks("dlq", 10); len(got) != 0 {
			t.Fatalf("refused starts left tasks: %+v", got)
		}

		// Back to where they came from, as fast as the store goes.
		f.deadLetters(src, "s1", "s2")
		f.deadLetters(src2, "t1")
		if n := f.depth(dlq); n != "3" {
			t.Fatalf("dead-letter queue depth %s", n)
		}
		if _, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq"))}); err != nil {
			t.Fatal(err)
		}
		f.api.movers.wait()
		wantTask(t, f.tasks("dlq", 1)[0], "COMPLETED", 3, 3)
		if got := f.drain(src); !slices.Equal(got, []string{"s1", "s2"}) {
			t.Fatalf("src got back %v", got)
		}
		if got := f.drain(src2); !slices.Equal(got, []string{"t1"}) {
			t.Fatalf("src2 got back %v", got)
		}

		// To a named queue, two a second; cancelled after the first
		// second.
		f.deadLetters(src, "m1", "m2", "m3", "m4", "m5")
		start, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq")),
			DestinationArn: aws.String(arn("dest")), MaxNumberOfMessagesPerSecond: aws.Int32(2)})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil { // the runner waits out its second
			t.Fatal(err)
		}
		_, err = f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq"))})
		wantAPIError(t, "a second task of a source", err, "InvalidParameterValue")
		running := f.tasks("dlq", 1)[0]
		wantTask(t, running, "RUNNING", 2, 5)
		if aws.ToString(running.TaskHandle) != *start.TaskHandle || aws.ToString(running.DestinationArn) != arn("dest") ||
			aws.ToInt32(running.MaxNumberOfMessagesPerSecond) != 2 {
			t.Fatalf("running task %+v", running)
		}
		f.clk.Advance(time.Second)
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		cancelled, err := f.c.CancelMessageMoveTask(f.ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: start.TaskHandle})
		if err != nil || cancelled.ApproximateNumberOfMessagesMoved != 4 {
			t.Fatalf("CancelMessageMoveTask = %+v, %v; want 4 moved", cancelled, err)
		}
		wantTask(t, f.tasks("dlq", 1)[0], "CANCELLING", 4, 5)
		f.clk.Advance(time.Second)
		f.api.movers.wait()
		tasks := f.tasks("dlq", 10)
		if len(tasks) != 2 {
			t.Fatalf("%d tasks listed, want 2", len(tasks))
		}
		wantTask(t, tasks[0], "CANCELLED", 4, 5)
		wantTask(t, tasks[1], "COMPLETED", 3, 3)
		if tasks[0].TaskHandle != nil {
			t.Fatalf("a cancelled task has a handle: %+v", tasks[0])
		}
		_, err = f.c.CancelMessageMoveTask(f.ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: start.TaskHandle})
		wantAPIError(t, "cancel of a cancelled task", err, "AWS.SimpleQueueService.UnsupportedOperation")
		_, err = f.c.CancelMessageMoveTask(f.ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: aws.String("bm8gc3VjaCB0YXNr")})
		wantRefused(t, "cancel with a handle that is none", err, 400, "InvalidParameterValue", "Value for parameter TaskHandle is invalid.")
		handle := func(source, id string) *string {
			return aws.String(base64.StdEncoding.EncodeToString([]byte(`{"taskId":"` + id + `","sourceArn":"` + arn(source) + `"}`)))
		}
		_, err = f.c.CancelMessageMoveTask(f.ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: handle("dlq", "nope")})
		wantRefused(t, "cancel of an unknown task", err, 404, "ResourceNotFoundException", "Task does not exist.")
		_, err = f.c.CancelMessageMoveTask(f.ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: handle("missing", "nope")})
		wantRefused(t, "cancel of a task of a missing queue", err, 404, "ResourceNotFoundException",
			"The resource that you specified for the SourceArn parameter doesn't exist.")
		if got := f.drain(dest); !slices.Equal(got, []string{"m1", "m2", "m3", "m4"}) {
			t.Fatalf("dest got %v", got)
		}
		if got := f.drain(dlq); !slices.Equal(got, []string{"m5"}) {
			t.Fatalf("dlq kept %v", got)
		}
	})
}

// A server that stops in the middle of a move task loses and repeats
// nothing: a new server on the same database takes the task over once
// its progress is stale, and every message arrives once.
func TestMessageMoveTaskSurvivesARestart(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		dlq := f.create("dlq", nil)
		src := f.create("src", redrive("dlq", 1))
		bodies := []string{"m1", "m2", "m3", "m4", "m5"}
		f.deadLetters(src, bodies...)
		if _, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq")),
			MaxNumberOfMessagesPerSecond: aws.Int32(2)}); err != nil {
			t.Fatal(err)
		}
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil { // two moved; the runner waits
			t.Fatal(err)
		}
		wantTask(t, f.tasks("dlq", 1)[0], "RUNNING", 2, 5)
		f.restart()
		// The new server finds the task when it starts (nothing asks it
		// about the task before it runs it), keeps an eye on it until it
		// is stale, then runs it.
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(staleTask)
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		wantTask(t, f.tasks("dlq", 1)[0], "RUNNING", 4, 5)
		f.clk.Advance(time.Second)
		f.api.movers.wait()
		wantTask(t, f.tasks("dlq", 1)[0], "COMPLETED", 5, 5)
		if got := f.drain(src); !slices.Equal(got, bodies) {
			t.Fatalf("src got back %v, want each of %v once", got, bodies)
		}
		if n := f.depth(dlq); n != "0" {
			t.Fatalf("dead-letter queue depth %s after the move", n)
		}
	})
}

// fifoPair creates the FIFO queues dlq.fifo and src.fifo, whose messages
// move to dlq.fifo after one receive, and returns src.fifo's URL.
func (f *dlqFixture) fifoPair() string {
	f.t.Helper()
	fifo := map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}
	f.create("dlq.fifo", fifo)
	attrs := redrive("dlq.fifo", 1)
	maps.Copy(attrs, fifo)
	return f.create("src.fifo", attrs)
}

// A FIFO dead-letter queue holds a group's later messages behind its
// first; a move task moves them all, not only the first of each group.
func TestMessageMoveTaskOfAFIFOGroup(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		src := f.fifoPair()
		for _, b := range []string{"g1", "g2", "g3"} {
			if _, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String(b),
				MessageGroupId: aws.String("g")}); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.receive(src, 10); len(got) != 3 {
			t.Fatalf("received %d of the group, want 3", len(got))
		}
		f.reap()
		if _, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq.fifo"))}); err != nil {
			t.Fatal(err)
		}
		f.api.movers.wait()
		wantTask(t, f.tasks("dlq.fifo", 1)[0], "COMPLETED", 3, 3)
		if got := f.drain(src); !slices.Equal(got, []string{"g1", "g2", "g3"}) {
			t.Fatalf("src.fifo got back %v", got)
		}
	})
}

// A message redriven into a FIFO queue goes after the messages of its
// group already there, as a message sent then would, and keeps its
// MessageId.
func TestRedrivenMessageJoinsTheEndOfItsGroup(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		src := f.fifoPair()
		sendTo := func(bodies ...string) {
			t.Helper()
			for _, b := range bodies {
				if _, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String(b),
					MessageGroupId: aws.String("g")}); err != nil {
					t.Fatal(err)
				}
			}
		}
		sendTo("g1")
		first := f.receive(src, 10)
		if len(first) != 1 {
			t.Fatalf("received %d, want g1", len(first))
		}
		f.reap()
		// g2 is received (its group held), g3 waits behind it; then g1
		// comes back from the dead-letter queue.
		sendTo("g2", "g3")
		held := f.receive(src, 1)
		if len(held) != 1 || *held[0].Body != "g2" {
			t.Fatalf("received %v, want g2", held)
		}
		if _, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq.fifo"))}); err != nil {
			t.Fatal(err)
		}
		f.api.movers.wait()
		wantTask(t, f.tasks("dlq.fifo", 1)[0], "COMPLETED", 1, 1)
		if _, err := f.c.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(src), ReceiptHandle: held[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		ms := f.receive(src, 10)
		var got []string
		for _, m := range ms {
			got = append(got, *m.Body)
		}
		if !slices.Equal(got, []string{"g3", "g1"}) {
			t.Fatalf("the group gives %v, want g3 (sent before g1 came back), then g1", got)
		}
		if *ms[1].MessageId != *first[0].MessageId {
			t.Fatalf("g1 came back as %s, sent as %s", *ms[1].MessageId, *first[0].MessageId)
		}
	})
}

// A dead-letter queue deleted after messages were sent takes none of
// them: a message past its maxReceiveCount stays dead in its own queue,
// for `leasehold dead list` and `dead redrive`, its last error naming the
// missing queue, and the deleted queue stays deleted; once a queue of the
// name is created again, it takes dead letters again. A move task whose
// destination, or a message's source, was deleted fails, with the
// FailureReason Amazon SQS gives, the code
// AWS.SimpleQueueService.NonExistentQueue, and leaves the messages where
// they are.
func TestDeletedDeadLetterQueue(t *testing.T) {
	forEachDurable(t, func(t *testing.T, f *dlqFixture) {
		dlq := f.create("dlq", nil)
		src := f.create("src", redrive("dlq", 1))
		f.send(src, "orphan")
		if _, err := f.c.DeleteQueue(f.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(dlq)}); err != nil {
			t.Fatal(err)
		}
		if got := f.receive(src, 10); len(got) != 1 {
			t.Fatalf("received %d, want the message", len(got))
		}
		f.reap()
		_, err := f.c.GetQueueUrl(f.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("dlq")})
		wantAPIError(t, "GetQueueUrl of the deleted dead-letter queue", err, "AWS.SimpleQueueService.NonExistentQueue")
		dead, err := f.st.List(f.ctx, store.ListFilter{Queue: "src", State: store.Dead, Limit: 10})
		if err != nil || len(dead) != 1 || string(dead[0].Payload) != "orphan" || dead[0].DeadReason != store.ReasonLeaseExpired ||
			dead[0].LastError != "lease expired; not moved to its dead-letter queue dlq, which does not exist" {
			t.Fatalf("dead in src: %+v, %v; want the message, its error naming dlq", dead, err)
		}
		if st, err := f.st.Stats(f.ctx, "dlq"); err != nil || st.Pending+st.Waiting+st.Dead != 0 {
			t.Fatalf("the deleted queue: %+v, %v", st, err)
		}

		// Created again, the queue takes dead letters again. (The source
		// sets its policy again, so that the new queue lists it among
		// its sources, which the move tasks below need.) Its name is
		// free once the cooldown after its deletion has passed.
		f.clk.Advance(cooldown)
		dlq = f.create("dlq", nil)
		if _, err := f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(src), Attributes: redrive("dlq", 1)}); err != nil {
			t.Fatal(err)
		}
		f.deadLetters(src, "again")
		if got := f.drain(dlq); !slices.Equal(got, []string{"again"}) {
			t.Fatalf("the new dead-letter queue got %v", got)
		}

		// Back to a source deleted since its messages died: the task
		// fails, and the messages stay.
		gone := f.create("gone", redrive("dlq", 1))
		f.deadLetters(gone, "g1")
		if _, err := f.c.DeleteQueue(f.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(gone)}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq"))}); err != nil {
			t.Fatal(err)
		}
		f.api.movers.wait()
		task := f.tasks("dlq", 1)[0]
		wantTask(t, task, "FAILED", 0, 1)
		if want := "AWS.SimpleQueueService.NonExistentQueue"; aws.ToString(task.FailureReason) != want {
			t.Fatalf("FailureReason %q, want %q", aws.ToString(task.FailureReason), want)
		}
		if n := f.depth(dlq); n != "1" {
			t.Fatalf("dead-letter queue depth %s, want 1", n)
		}
		f.drain(dlq)

		// To a destination deleted while the task runs: the batch after
		// the delete fails the task, and stays.
		dest := f.create("dest", nil)
		f.deadLetters(src, "m1", "m2")
		if _, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq")),
			DestinationArn: aws.String(arn("dest")), MaxNumberOfMessagesPerSecond: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil { // one moved; the runner waits
			t.Fatal(err)
		}
		if _, err := f.c.DeleteQueue(f.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(dest)}); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Second)
		f.api.movers.wait()
		task = f.tasks("dlq", 1)[0]
		wantTask(t, task, "FAILED", 1, 2)
		if want := "AWS.SimpleQueueService.NonExistentQueue"; aws.ToString(task.FailureReason) != want {
			t.Fatalf("FailureReason %q, want %q", aws.ToString(task.FailureReason), want)
		}
		if n := f.depth(dlq); n != "1" {
			t.Fatalf("dead-letter queue depth %s, want the second message", n)
		}
	})
}
