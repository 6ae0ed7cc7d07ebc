package worker

import (
	"bytes"
	"testing"
)

func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte(`{"request_id":1,"output":"aGk="}`))
	f.Add([]byte(`{"request_id":7,"error":"boom"}`))
	f.Add([]byte(`{"request_id":0}`))
	f.Add([]byte(`{"output":"!!"}`))
	f.Add([]byte(`not json`))
	f.Add(encodeReply(Reply{RequestID: 3, Output: []byte{0, 0xff}, Error: "x"}))
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := DecodeReply(payload)
		if err != nil {
			return
		}
		if r.RequestID <= 0 {
			t.Fatalf("decoded a reply without a request id: %+v", r)
		}
		again, err := DecodeReply(encodeReply(r))
		if err != nil || again.RequestID != r.RequestID || !bytes.Equal(again.Output, r.Output) || again.Error != r.Error {
			t.Fatalf("round trip of %+v gave %+v, %v", r, again, err)
		}
	})
}
