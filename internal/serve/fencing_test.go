package serve_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// fifoQueue creates a FIFO queue with content-based deduplication.
func (f *fixture) fifoQueue(name string, attrs map[string]string) string {
	f.t.Helper()
	all := map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}
	for k, v := range attrs {
		all[k] = v
	}
	return f.createQueue(name, all)
}

// sendGroup sends n messages g1 to gn to group g, in order.
func (f *fixture) sendGroup(url, g string, n int) []string {
	f.t.Helper()
	var want []string
	for i := range n {
		body := fmt.Sprintf("%s%d", g, i+1)
		f.send(url, body, g)
		want = append(want, body)
	}
	return want
}

// wantExpired checks that err is SQS's error for an expired receipt
// handle: InvalidParameterValue, naming the handle.
func wantExpired(t *testing.T, what string, err error, handle string) {
	t.Helper()
	wantCode(t, what, err, "InvalidParameterValue")
	var ae smithy.APIError
	errors.As(err, &ae)
	want := "Value " + handle + " for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
	if ae.ErrorMessage() != want {
		t.Fatalf("%s: message %q, want %q", what, ae.ErrorMessage(), want)
	}
}

// A FIFO receive of 10 takes ten messages of one group, in order; no other
// receive gets one of the group until every one of them is deleted, in
// any order.
func TestFIFOReceivesAGroupTogether(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.fifoQueue("runs.fifo", nil)
		want := f.sendGroup(url, "g", 12)
		got := f.receive(url, 10, 30)
		if !slices.Equal(bodies(got), want[:10]) {
			t.Fatalf("received %v, want %v", bodies(got), want[:10])
		}
		if more := f.receive(url, 10, 30); len(more) != 0 {
			t.Fatalf("a second receive got %v while the group is in flight", bodies(more))
		}
		// Deleted out of order, but for one: the group stays locked.
		for i := len(got) - 1; i >= 1; i-- {
			if err := f.delete(url, got[i].handle); err != nil {
				t.Fatalf("DeleteMessage %s: %v", got[i].body, err)
			}
			if more := f.receive(url, 10, 30); len(more) != 0 {
				t.Fatalf("received %v with %s not yet deleted", bodies(more), got[0].body)
			}
		}
		if err := f.delete(url, got[0].handle); err != nil {
			t.Fatal(err)
		}
		if rest := f.receive(url, 10, 30); !slices.Equal(bodies(rest), want[10:]) {
			t.Fatalf("after the group: %v, want %v", bodies(rest), want[10:])
		}
	})
}

// A message of a FIFO group that is not deleted in time brings back the
// group's later messages still in flight, even those whose visibility was
// extended: the next receive gets them again in order. The expired
// handles answer as SQS's do, and change nothing.
func TestFIFOMessageBackBringsTheRestBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.fifoQueue("back.fifo", nil)
		want := f.sendGroup(url, "g", 5)
		got := f.receive(url, 10, 30)
		if len(got) != 5 {
			t.Fatalf("received %v, want 5", bodies(got))
		}
		for _, m := range got[:2] {
			if err := f.delete(url, m.handle); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range got[3:] {
			if _, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
				ReceiptHandle: aws.String(m.handle), VisibilityTimeout: 300}); err != nil {
				t.Fatal(err)
			}
		}
		f.clk.Advance(31 * time.Second)
		f.reap()
		wantExpired(t, "DeleteMessage of the expired message", f.delete(url, got[2].handle), got[2].handle)
		wantExpired(t, "DeleteMessage of one brought back", f.delete(url, got[3].handle), got[3].handle)
		_, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
			ReceiptHandle: aws.String(got[4].handle), VisibilityTimeout: 60})
		wantExpired(t, "ChangeMessageVisibility of one brought back", err, got[4].handle)
		out, err := f.c.DeleteMessageBatch(f.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("e"), ReceiptHandle: aws.String(got[4].handle)}}})
		if err != nil || len(out.Failed) != 1 || *out.Failed[0].Code != "InvalidParameterValue" || !strings.HasSuffix(*out.Failed[0].Message, "The receipt handle has expired.") {
			t.Fatalf("DeleteMessageBatch of an expired handle = %+v, %v", out, err)
		}
		again := f.receive(url, 10, 30)
		if !slices.Equal(bodies(again), want[2:]) {
			t.Fatalf("received again %v, want %v", bodies(again), want[2:])
		}
		a, _ := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		if len(a.Messages) != 0 {
			t.Fatalf("the group is in flight, yet a receive got %v", *a.Messages[0].Body)
		}
		for _, m := range again {
			if err := f.delete(url, m.handle); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// On a standard queue a handle deletes its message after its visibility
// timeout while no other receive has taken it, and a delete repeated with
// it succeeds; a handle whose message another receive has taken since is
// refused, and changes nothing.
func TestLateDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("late", nil)
		f.send(url, "expired", "")
		first := f.receive(url, 1, 10)
		f.clk.Advance(11 * time.Second)
		if err := f.delete(url, first[0].handle); err != nil {
			t.Fatalf("DeleteMessage after the visibility timeout: %v", err)
		}
		f.send(url, "reaped", "")
		reaped := f.receive(url, 1, 10)
		f.clk.Advance(11 * time.Second)
		f.reap()
		if err := f.delete(url, reaped[0].handle); err != nil {
			t.Fatalf("DeleteMessage after the message went back: %v", err)
		}
		for range 2 {
			if err := f.delete(url, reaped[0].handle); err != nil {
				t.Fatalf("DeleteMessage retried: %v", err)
			}
		}
		out, err := f.c.DeleteMessageBatch(f.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("a"), ReceiptHandle: aws.String(first[0].handle)}, {Id: aws.String("b"), ReceiptHandle: aws.String(reaped[0].handle)}}})
		if err != nil || len(out.Successful) != 2 {
			t.Fatalf("DeleteMessageBatch retried = %+v, %v", out, err)
		}
		if a := f.attrs(url); a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
			t.Fatalf("after the deletes: %v", a)
		}

		f.send(url, "taken", "")
		old := f.receive(url, 1, 10)
		f.clk.Advance(11 * time.Second)
		f.reap()
		cur := f.receive(url, 1, 10)
		wantCode(t, "DeleteMessage with a handle received again since", f.delete(url, old[0].handle), "ReceiptHandleIsInvalid")
		if a := f.attrs(url); a["ApproximateNumberOfMessagesNotVisible"] != "1" {
			t.Fatalf("the refused delete changed something: %v", a)
		}
		if err := f.delete(url, cur[0].handle); err != nil {
			t.Fatal(err)
		}
	})
}

// A visibility timeout of zero makes a received message visible again at
// once. On a standard queue its handle still deletes it until another
// receive takes it; on a FIFO queue the handle has expired.
func TestZeroVisibility(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("zero", map[string]string{"VisibilityTimeout": "0"})
		f.send(url, "m", "")
		first := f.receive(url, 1, 0)
		second := f.receive(url, 1, 0)
		if len(first) != 1 || len(second) != 1 || first[0].id != second[0].id {
			t.Fatalf("received %v, then %v; want the message twice", first, second)
		}
		wantCode(t, "DeleteMessage with the first handle", f.delete(url, first[0].handle), "ReceiptHandleIsInvalid")
		if err := f.delete(url, second[0].handle); err != nil {
			t.Fatalf("DeleteMessage with the last handle: %v", err)
		}
		if got := f.receive(url, 1, 0); len(got) != 0 {
			t.Fatalf("received %v after the delete", bodies(got))
		}

		fifo := f.fifoQueue("zero.fifo", map[string]string{"VisibilityTimeout": "0"})
		want := f.sendGroup(fifo, "g", 3)
		got := f.receive(fifo, 10, 0)
		if !slices.Equal(bodies(got), want) {
			t.Fatalf("FIFO received %v, want %v", bodies(got), want)
		}
		wantExpired(t, "DeleteMessage on a FIFO queue", f.delete(fifo, got[0].handle), got[0].handle)
		out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(fifo), MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		if err != nil || len(out.Messages) != 3 {
			t.Fatalf("FIFO received again %+v, %v", out, err)
		}
		for _, m := range out.Messages {
			if m.Attributes["ApproximateReceiveCount"] != "2" {
				t.Fatalf("%s received %s times, want 2: each receive counts", *m.Body, m.Attributes["ApproximateReceiveCount"])
			}
		}
	})
}

// On a standard queue a handle whose visibility timeout has ended still
// changes its message's visibility while no other receive has taken it,
// and still deletes it after; once another receive has, it is refused.
func TestLateChangeMessageVisibility(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("late-visibility", nil)
		f.send(url, "m", "")
		got := f.receive(url, 1, 10)
		change := func(handle string, v int32) error {
			_, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
				ReceiptHandle: aws.String(handle), VisibilityTimeout: v})
			return err
		}
		f.clk.Advance(11 * time.Second)
		if err := change(got[0].handle, 60); err != nil {
			t.Fatalf("ChangeMessageVisibility after the visibility timeout: %v", err)
		}
		f.reap()
		if more := f.receive(url, 1, 10); len(more) != 0 {
			t.Fatalf("received %v while it should be invisible for 60 s", bodies(more))
		}
		if err := change(got[0].handle, 0); err != nil {
			t.Fatalf("ChangeMessageVisibility to 0: %v", err)
		}
		again := f.receive(url, 1, 10)
		if len(again) != 1 {
			t.Fatalf("received %v, want the message again", bodies(again))
		}
		wantCode(t, "ChangeMessageVisibility with a handle received again since", change(got[0].handle, 60), "ReceiptHandleIsInvalid")
		if a := f.attrs(url); a["ApproximateNumberOfMessagesNotVisible"] != "1" {
			t.Fatalf("the refused change changed something: %v", a)
		}
		f.clk.Advance(11 * time.Second)
		f.reap()
		if err := change(again[0].handle, 30); err != nil {
			t.Fatalf("ChangeMessageVisibility of a message the reaper gave back: %v", err)
		}
		if err := f.delete(url, again[0].handle); err != nil {
			t.Fatalf("DeleteMessage after a late change: %v", err)
		}
	})
}
