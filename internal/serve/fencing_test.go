package serve_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/store"
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

// changeVisibility sets the visibility timeout of a received message.
func (f *fixture) changeVisibility(url, handle string, timeout int32) {
	f.t.Helper()
	if _, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
		ReceiptHandle: aws.String(handle), VisibilityTimeout: timeout}); err != nil {
		f.t.Fatalf("ChangeMessageVisibility: %v", err)
	}
}

// Each message of a FIFO group received together keeps a visibility
// timeout of its own, as in SQS: one that is not deleted in time is
// visible again alone, and the group gives it out again at once, while
// its later messages, their timeouts extended, stay hidden under their
// handles; no receive gets a message behind one that is hidden. The
// expired handle answers as SQS's does, and changes nothing.
func TestFIFOVisibilityIsPerMessage(t *testing.T) {
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
			f.changeVisibility(url, m.handle, 300)
		}
		f.clk.Advance(31 * time.Second)
		f.reap()
		wantExpired(t, "DeleteMessage of the expired message", f.delete(url, got[2].handle), got[2].handle)
		again := f.receive(url, 10, 30)
		if !slices.Equal(bodies(again), want[2:3]) {
			t.Fatalf("received again %v, want %v: the later ones are hidden", bodies(again), want[2:3])
		}
		if more := f.receive(url, 10, 30); len(more) != 0 {
			t.Fatalf("received %v while every message of the group is hidden", bodies(more))
		}
		for _, m := range append(again, got[3:]...) {
			if err := f.delete(url, m.handle); err != nil {
				t.Fatalf("DeleteMessage %s: %v", m.body, err)
			}
		}
		if rest := f.receive(url, 10, 30); len(rest) != 0 {
			t.Fatalf("received %v after every message was deleted", bodies(rest))
		}
	})
}

// A FIFO message made visible again, by a visibility timeout of zero or
// of one second that ends, is received again at once, after the groups
// that were waiting, without the later message of its group received
// with it, which is hidden for its own 30 seconds (Amazon's recorded
// answers).
func TestFIFOMessageVisibleAgainAlone(t *testing.T) {
	for _, timeout := range []int32{0, 1} {
		t.Run(fmt.Sprintf("timeout %d", timeout), func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				f := setup(t, b, options{})
				url := f.fifoQueue("alone.fifo", map[string]string{"VisibilityTimeout": "30"})
				for _, m := range []struct{ body, group string }{{"g1-m1", "g1"}, {"g1-m2", "g1"}, {"g2-m1", "g2"}} {
					f.send(url, m.body, m.group)
				}
				f.clk.Advance(time.Millisecond)
				got := f.receive(url, 2, 30)
				if want := []string{"g1-m1", "g1-m2"}; !slices.Equal(bodies(got), want) {
					t.Fatalf("received %v, want %v", bodies(got), want)
				}
				f.changeVisibility(url, got[0].handle, timeout)
				f.clk.Advance(2 * time.Second)
				f.reap()
				if again, want := f.receive(url, 3, 30), []string{"g2-m1", "g1-m1"}; !slices.Equal(bodies(again), want) {
					t.Fatalf("timeout %d: received %v, want %v", timeout, bodies(again), want)
				}
			})
		})
	}
}

// When one message of a FIFO group received together gets a longer
// visibility timeout, the messages before it come back when their
// timeouts end, and it and those after it stay hidden (Amazon's
// recorded answers).
func TestFIFOLongerTimeoutHidesTheRest(t *testing.T) {
	for extended := range 3 {
		t.Run(fmt.Sprintf("message %d extended", extended), func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				f := setup(t, b, options{})
				url := f.fifoQueue("longer.fifo", map[string]string{"VisibilityTimeout": "1"})
				want := []string{"foo", "bar", "baz"}
				for _, body := range want {
					f.send(url, body, "1")
				}
				got := f.receive(url, 5, 1)
				if !slices.Equal(bodies(got), want) {
					t.Fatalf("received %v, want %v", bodies(got), want)
				}
				f.changeVisibility(url, got[extended].handle, 4)
				f.clk.Advance(2500 * time.Millisecond)
				f.reap()
				if again := f.receive(url, 5, 1); !slices.Equal(bodies(again), want[:extended]) {
					t.Fatalf("message %d extended: received %v, want %v", extended, bodies(again), want[:extended])
				}
			})
		})
	}
}

// tickingReleases is a store whose clock moves on a millisecond before
// each release, as real time does between two transactions.
type tickingReleases struct {
	store.Store
	clk *clocktest.Clock
}

func (s tickingReleases) Release(ctx context.Context, r store.Release) error {
	s.clk.Advance(time.Millisecond)
	return s.Store.Release(ctx, r)
}

// Messages received with a visibility timeout of zero go back in the
// order received: the groups a receive took come again in their old
// order, after a group that was waiting (Amazon's recorded answer). The
// queue's timeout is zero, as an SDK sends no receive's timeout of zero.
func TestFIFOZeroVisibilityKeepsGroupOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{adjust: func(c *serve.Config) {
			c.Store = tickingReleases{c.Store, c.Clock.(*clocktest.Clock)}
		}})
		url := f.fifoQueue("zero.fifo", map[string]string{"VisibilityTimeout": "0"})
		for _, m := range []struct{ body, group string }{{"g1-m1", "g1"}, {"g2-m1", "g2"}, {"g2-m2", "g2"}, {"g3-m1", "g3"}, {"g1-m2", "g1"}} {
			f.send(url, m.body, m.group)
		}
		f.clk.Advance(time.Millisecond)
		if got, want := f.receive(url, 3, 0), []string{"g1-m1", "g1-m2", "g2-m1"}; !slices.Equal(bodies(got), want) {
			t.Fatalf("received %v, want %v", bodies(got), want)
		}
		if got, want := f.receive(url, 10, 0), []string{"g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"}; !slices.Equal(bodies(got), want) {
			t.Fatalf("received again %v, want %v", bodies(got), want)
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
