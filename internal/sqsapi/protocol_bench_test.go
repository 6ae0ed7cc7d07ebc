package sqsapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkProtocolCodecs measures what each protocol costs the server
// for one cycle of 10 messages of 100 bytes, as the throughput benchmarks
// run it: decoding a SendMessageBatch's input and encoding its output,
// encoding a ReceiveMessage's output of the 10 messages, and decoding a
// DeleteMessageBatch's input and encoding its output. No store, no
// network: the difference between json and query is the encodings'.
func BenchmarkProtocolCodecs(b *testing.B) {
	body := strings.Repeat("x", 100)
	var sendJSON, deleteJSON strings.Builder
	sendForm := url.Values{"Action": {"SendMessageBatch"}, "QueueUrl": {"http://h/000000000000/q"}}
	deleteForm := url.Values{"Action": {"DeleteMessageBatch"}, "QueueUrl": {"http://h/000000000000/q"}}
	sendJSON.WriteString(`{"QueueUrl":"http://h/000000000000/q","Entries":[`)
	deleteJSON.WriteString(`{"QueueUrl":"http://h/000000000000/q","Entries":[`)
	received := struct {
		Messages []message `json:"Messages,omitempty"`
	}{}
	sentOut := batchOutput[sent]{Failed: []batchFailure{}}
	deletedOut := batchOutput[batchSuccess]{Failed: []batchFailure{}}
	for i := range 10 {
		id, n := strconv.Itoa(i), strconv.Itoa(i+1)
		handle := "1" + id + ".1" + id + ".YV_ugCClKRQyqrEkLPjv6Q"
		if i > 0 {
			sendJSON.WriteString(",")
			deleteJSON.WriteString(",")
		}
		sendJSON.WriteString(`{"Id":"` + id + `","MessageBody":"` + body + `"}`)
		deleteJSON.WriteString(`{"Id":"` + id + `","ReceiptHandle":"` + handle + `"}`)
		sendForm.Set("SendMessageBatchRequestEntry."+n+".Id", id)
		sendForm.Set("SendMessageBatchRequestEntry."+n+".MessageBody", body)
		deleteForm.Set("DeleteMessageBatchRequestEntry."+n+".Id", id)
		deleteForm.Set("DeleteMessageBatchRequestEntry."+n+".ReceiptHandle", handle)
		received.Messages = append(received.Messages, message{MessageId: "1" + id, ReceiptHandle: handle, MD5OfBody: bodyMD5(body), Body: body})
		sentOut.Successful = append(sentOut.Successful, sent{Id: id, MessageId: "1" + id, MD5OfMessageBody: bodyMD5(body)})
		deletedOut.Successful = append(deletedOut.Successful, batchSuccess{id})
	}
	sendJSON.WriteString("]}")
	deleteJSON.WriteString("]}")
	formPost := formRequest("/", "")
	type codec struct {
		decode func(action string, body []byte, v any) error
		encode func(action string, out any) error
	}
	codecs := map[string]codec{
		"json": {
			decode: func(_ string, body []byte, v any) error {
				if err := scanInput(body); err != nil {
					return err
				}
				return json.NewDecoder(bytes.NewReader(body)).Decode(v)
			},
			encode: func(_ string, out any) error { return encodeJSON(io.Discard, out) },
		},
		"query": {
			decode: func(action string, body []byte, v any) error {
				root, err := parseForm(formPost, body)
				if err != nil {
					return err
				}
				if err := root.decode(v, action); err != nil {
					return err
				}
				return nil
			},
			encode: func(action string, out any) error { return encodeXML(io.Discard, action, "r", out) },
		},
	}
	inputs := map[string][2][]byte{
		"json":  {[]byte(sendJSON.String()), []byte(deleteJSON.String())},
		"query": {[]byte(sendForm.Encode()), []byte(deleteForm.Encode())},
	}
	for _, protocol := range []string{"json", "query"} {
		c, in := codecs[protocol], inputs[protocol]
		b.Run(protocol, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var send sendBatch
				var del handleBatch
				if err := c.decode("SendMessageBatch", in[0], &send); err != nil || len(send.Entries) != 10 {
					b.Fatalf("decode SendMessageBatch: %v, %d entries", err, len(send.Entries))
				}
				if err := c.encode("SendMessageBatch", sentOut); err != nil {
					b.Fatal(err)
				}
				if err := c.encode("ReceiveMessage", received); err != nil {
					b.Fatal(err)
				}
				if err := c.decode("DeleteMessageBatch", in[1], &del); err != nil || len(del.Entries) != 10 {
					b.Fatalf("decode DeleteMessageBatch: %v, %d entries", err, len(del.Entries))
				}
				if err := c.encode("DeleteMessageBatch", deletedOut); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
