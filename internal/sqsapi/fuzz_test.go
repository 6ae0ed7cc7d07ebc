package sqsapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// Whatever a client sends, the API answers with its output or with an
// error of the sender's in SQS's shape, and never fails on the server's
// side: bad input is named, not crashed on.
func FuzzAPI(f *testing.F) {
	seeds := []struct{ action, body string }{
		{"CreateQueue", `{"QueueName":"q","Attributes":{"VisibilityTimeout":"5","RedrivePolicy":"{\"maxReceiveCount\":2}"}}`},
		{"CreateQueue", `{"QueueName":"f.fifo","Attributes":{"FifoQueue":"true"}}`},
		{"SendMessage", `{"QueueUrl":"/q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"Number","StringValue":"1"}}}`},
		{"SendMessage", `{"QueueUrl":"/f.fifo","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"d"}`},
		{"SendMessageBatch", `{"QueueUrl":"/q","Entries":[{"Id":"a","MessageBody":"1"},{"Id":"b","MessageBody":"2","DelaySeconds":3}]}`},
		{"ReceiveMessage", `{"QueueUrl":"/q","MaxNumberOfMessages":10,"AttributeNames":["All"],"MessageAttributeNames":["a.*"]}`},
		{"DeleteMessage", `{"QueueUrl":"/q","ReceiptHandle":"1.1.xyz"}`},
		{"ChangeMessageVisibilityBatch", `{"QueueUrl":"/q","Entries":[{"Id":"a","ReceiptHandle":"1.1","VisibilityTimeout":0}]}`},
		{"GetQueueAttributes", `{"QueueUrl":"/q","AttributeNames":["All"]}`},
		{"SetQueueAttributes", `{"QueueUrl":"/q","Attributes":{"DelaySeconds":"901"}}`},
		{"ListQueues", `{"MaxResults":1,"NextToken":"cQ"}`},
		{"Nope", `{}`},
		{"SendMessage", `not json`},
		{"SendMessage", `{"QueueUrl":"/q","MessageBody":"\ud800","MessageAttributes":{"a":{"DataType":"Number","StringValue":"1e126"}}}`},
		{"SendMessageBatch", `{"QueueUrl":"/q","Entries":[[[[{"Id":"a","MessageBody":"\udbff\udfff"}]]]]}`},
	}
	for _, s := range seeds {
		f.Add(s.action, s.body)
	}
	f.Fuzz(func(t *testing.T, action, body string) {
		clk := clocktest.New()
		st, err := memory.New(memory.Config{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		key, err := st.ServerSecret(context.Background(), "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(Config{Store: st, ReceiptKey: key, MessageIDs: testIDs(t), Clock: clk, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		// The fake clock never moves: long polls must not wait for it.
		a.Drain()
		for _, act := range []string{"CreateQueue", action} {
			in := body
			if act != action {
				in = `{"QueueName":"q"}`
			}
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(in))
			r.Header.Set("X-Amz-Target", targetPrefix+act)
			w := httptest.NewRecorder()
			a.ServeHTTP(w, r)
			var out map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatalf("%s %q: the answer is not JSON: %q", act, in, w.Body.String())
			}
			switch {
			case w.Code == http.StatusOK:
			case w.Code >= 500:
				t.Fatalf("%s %q: status %d %s", act, in, w.Code, w.Body.String())
			case out["__type"] == nil || out["message"] == nil || w.Header().Get("X-Amzn-Query-Error") == "":
				t.Fatalf("%s %q: status %d without SQS's error shape: %s", act, in, w.Code, w.Body.String())
			}
		}
	})
}

// A receipt handle's lease part reads back as the lease it names, and
// nothing else reads as a lease.
func FuzzParseReceiptHandle(f *testing.F) {
	for _, s := range []string{"1.1", "zz.zz", "0.1", "1.0", "-1.5", "+1.+1", "1", ".", "1.2.3", "", "7fffffffffff.1", "a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		l, ok := parseLease(h)
		if !ok {
			return
		}
		if l.MessageID <= 0 || l.FencingToken <= 0 {
			t.Fatalf("%q parsed to %+v", h, l)
		}
		if back, ok := parseLease(formatLease(l)); !ok || back != l {
			t.Fatalf("round trip of %+v: %+v, %v", l, back, ok)
		}
	})
}

// Only a handle that receipts made for a queue parses, and only with that
// queue: a change of any byte, or another key, is ReceiptHandleIsInvalid.
func FuzzReceiptHandleMAC(f *testing.F) {
	f.Add(int64(1), int64(1), "q", 0, byte(1))
	f.Add(int64(1<<40), int64(7), "orders.fifo", 5, byte('x'))
	key := make([]byte, MinReceiptKey)
	f.Fuzz(func(t *testing.T, id, token int64, queue string, at int, flip byte) {
		if id <= 0 || token <= 0 {
			return
		}
		r := receipts{key: key}
		l := store.Lease{MessageID: id, FencingToken: token}
		h := r.format(queue, l)
		if got, err := r.parse(queue, h); err != nil || got != l {
			t.Fatalf("%q: %+v, %v; want %+v", h, got, err, l)
		}
		if _, err := r.parse(queue+"x", h); err == nil || err.code != errReceiptHandleIsInvalid.code {
			t.Fatalf("%q parsed for another queue: %v", h, err)
		}
		if _, err := (receipts{key: append([]byte{1}, key[1:]...)}).parse(queue, h); err == nil {
			t.Fatalf("%q parsed under another key", h)
		}
		if flip == 0 {
			return
		}
		b := []byte(h)
		b[uint(at)%uint(len(b))] ^= flip
		if _, err := r.parse(queue, string(b)); err == nil {
			t.Fatalf("%q, changed to %q, still parses", h, b)
		}
	})
}
