package serve_test

import (
	"hash/crc32"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A receipt handle cannot be guessed: message ids and fencing tokens are
// small sequential numbers, so a handle made of them and of anything else
// public would let one consumer delete another's message. Every forged
// handle gets ReceiptHandleIsInvalid and changes nothing.
func TestForgedReceiptHandlesChangeNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("victims", nil)
		f.send(url, "theirs", "")
		f.send(url, "mine", "")
		got := f.receive(url, 2, 60)
		if len(got) != 2 {
			t.Fatalf("received %v", bodies(got))
		}
		theirs, mine := got[0], got[1]
		if theirs.body != "theirs" {
			theirs, mine = mine, theirs
		}
		// The lease part (message id and fencing token) of their handle,
		// which an attacker guesses by counting.
		parts := strings.Split(theirs.handle, ".")
		if len(parts) != 3 {
			t.Fatalf("handle %q has %d parts", theirs.handle, len(parts))
		}
		lease := parts[0] + "." + parts[1]
		myMAC := mine.handle[strings.LastIndexByte(mine.handle, '.')+1:]
		forged := map[string]string{
			"the lease and the queue's CRC-32": lease + "." + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte("victims"))), 36),
			"the lease and another's MAC":      lease + "." + myMAC,
			"the lease and a made-up MAC":      lease + ".AAAAAAAAAAAAAAAAAAAAAA",
			"the lease alone":                  lease,
			"the handle with its MAC cut":      theirs.handle[:len(theirs.handle)-1],
		}
		for what, h := range forged {
			wantCode(t, "DeleteMessage with "+what, f.delete(url, h), "ReceiptHandleIsInvalid")
			_, err := f.c.ChangeMessageVisibility(f.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
				ReceiptHandle: aws.String(h), VisibilityTimeout: 0})
			wantCode(t, "ChangeMessageVisibility with "+what, err, "ReceiptHandleIsInvalid")
			del, err := f.c.DeleteMessageBatch(f.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url),
				Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("x"), ReceiptHandle: aws.String(h)}}})
			if err != nil || len(del.Failed) != 1 || *del.Failed[0].Code != "ReceiptHandleIsInvalid" {
				t.Fatalf("DeleteMessageBatch with %s: %+v, %v", what, del, err)
			}
			vis, err := f.c.ChangeMessageVisibilityBatch(f.ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url),
				Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("x"), ReceiptHandle: aws.String(h)}}})
			if err != nil || len(vis.Failed) != 1 || *vis.Failed[0].Code != "ReceiptHandleIsInvalid" {
				t.Fatalf("ChangeMessageVisibilityBatch with %s: %+v, %v", what, vis, err)
			}
		}
		if a := f.attrs(url); a["ApproximateNumberOfMessagesNotVisible"] != "2" || a["ApproximateNumberOfMessages"] != "0" {
			t.Fatalf("after the forged calls: %v", a)
		}
		// The real handles still work.
		for _, m := range []receivedMsg{theirs, mine} {
			if err := f.delete(url, m.handle); err != nil {
				t.Fatalf("DeleteMessage of %s under its own handle: %v", m.body, err)
			}
		}
	})
}
