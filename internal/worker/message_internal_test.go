package worker

import (
	"math"
	"testing"

	"github.com/leasehold/leasehold/store"
)

// The documented limit on a reply's output is the real one: the largest
// output fits the payload limit whatever the request id, one byte more
// does not.
func TestMaxReplyOutputIsTheRealLimit(t *testing.T) {
	fits := encodeReply(Reply{RequestID: math.MaxInt64, Output: make([]byte, MaxReplyOutput)})
	if len(fits) > store.DefaultPayloadLimit {
		t.Fatalf("a reply of %d output bytes is %d bytes, over the limit of %d", MaxReplyOutput, len(fits), store.DefaultPayloadLimit)
	}
	over := encodeReply(Reply{RequestID: math.MaxInt64, Output: make([]byte, MaxReplyOutput+1)})
	if len(over) <= store.DefaultPayloadLimit {
		t.Fatalf("a reply of %d output bytes is %d bytes, within the limit of %d: MaxReplyOutput is too low", MaxReplyOutput+1, len(over), store.DefaultPayloadLimit)
	}
}
