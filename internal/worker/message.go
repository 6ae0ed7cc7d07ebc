package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/store"
)

// Message is a claimed message as a handler sees it. The embedded Delivery
// carries the payload, the fencing token (pass it to downstream systems so
// they can refuse a stale worker) and the attempt number. The worker, not
// the handler, completes or fails the message: a handler only returns.
type Message struct {
	// Delivery is the worker's own record of the message, which it
	// settles the message by: a handler must not change it.
	*store.Delivery
	reply    []byte
	hasReply bool
}

// Body returns the payload. It must not be modified.
func (m *Message) Body() []byte { return m.Payload }

// SetReply sets the output that is sent to the message's ReplyTo queue when
// the handler returns nil. Without ReplyTo it is ignored.
func (m *Message) SetReply(output []byte) {
	m.reply = output
	m.hasReply = true
}

// Handler handles one message. Returning nil completes it; an error fails it
// (retried with backoff until its deliveries are used up, then
// dead-lettered); an error marked with Permanent dead-letters it at once.
// The context is cancelled when the worker must stop the handler, with a
// cause from context.Cause: store.ErrLeaseLost, ErrMaxProcessingTime or
// ErrShutdown.
type Handler interface {
	Handle(ctx context.Context, msg *Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, msg *Message) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, msg *Message) error { return f(ctx, msg) }

// Reply is the payload of a reply message: the result of a request that
// named a ReplyTo queue. It is JSON; Output is base64 there.
type Reply struct {
	// RequestID is the id of the request message.
	RequestID int64 `json:"request_id"`
	// Output is what the handler set with SetReply.
	Output []byte `json:"output,omitempty"`
	// Error is the handler's error when it failed for good.
	Error string `json:"error,omitempty"`
}

// replyEnvelope is the length of the largest reply around its output: the
// JSON of the highest request id with an empty output.
const replyEnvelope = len(`{"request_id":9223372036854775807,"output":""}`)

// MaxReplyOutput is the most output a reply can carry on a store with the
// default payload limit: the reply's JSON carries the output in base64,
// four bytes for every three, so a handler's output may be about three
// quarters of the limit. Larger output makes the completion fail for good.
const MaxReplyOutput = (store.DefaultPayloadLimit - replyEnvelope) / 4 * 3

// DecodeReply parses a reply message's payload.
func DecodeReply(payload []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(payload, &r); err != nil {
		return Reply{}, fmt.Errorf("worker: reply payload is not a reply: %w", err)
	}
	if r.RequestID <= 0 {
		return Reply{}, fmt.Errorf("worker: reply payload has no request_id")
	}
	return r, nil
}

func encodeReply(r Reply) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		// A struct of an int, bytes and a string always marshals.
		panic(err)
	}
	return b
}
