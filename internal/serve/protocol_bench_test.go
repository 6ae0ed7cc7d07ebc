package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// The protocol benchmark compares SQS's two protocols on one server:
// the same throughput harness (runThroughput), through a client of each
// built by hand on net/http, so that the difference is the server's (and
// the encodings') and not that of an SDK.

// protocolClient sends one action in one protocol and reads its answer
// into out, whose fields are named as the JSON protocol names them.
type protocolClient interface {
	do(ctx context.Context, action string, in map[string]any, out any) error
}

// jsonClient speaks the JSON protocol.
type jsonClient struct {
	hc  *http.Client
	url string
}

func (c jsonClient) do(ctx context.Context, action string, in map[string]any, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	raw, err := post(ctx, c.hc, c.url, action, bytes.NewReader(body), "application/x-amz-json-1.0", "AmazonSQS."+action)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// post sends an action's request and returns its answer's body, or an
// error unless it succeeded.
func post(ctx context.Context, hc *http.Client, url, action string, body io.Reader, contentType, target string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: %d %s", action, resp.StatusCode, raw)
	}
	return raw, nil
}

// queryClient speaks the query protocol: in is flattened as SQS's query
// names it (the benchmark's inputs only), the XML answer read into out by
// the xml tags of its fields.
type queryClient struct {
	hc  *http.Client
	url string
}

func (c queryClient) do(ctx context.Context, action string, in map[string]any, out any) error {
	form := url.Values{"Action": {action}, "Version": {"2012-11-05"}}
	for k, v := range in {
		switch v := v.(type) {
		case string:
			form.Set(k, v)
		case int:
			form.Set(k, strconv.Itoa(v))
		case []string:
			for i, s := range v {
				form.Set(strings.TrimSuffix(k, "s")+"."+strconv.Itoa(i+1), s)
			}
		case []map[string]string:
			for i, e := range v {
				for f, s := range e {
					form.Set(action+"RequestEntry."+strconv.Itoa(i+1)+"."+f, s)
				}
			}
		}
	}
	raw, err := post(ctx, c.hc, c.url, action, strings.NewReader(form.Encode()), "application/x-www-form-urlencoded; charset=utf-8", "")
	if err != nil {
		return err
	}
	return xml.Unmarshal(raw, out)
}

// protocolOps is the queue through a protocolClient.
type protocolOps struct {
	c        protocolClient
	queueURL string
}

// batch sends a batch action and fails unless every entry succeeded.
func (o protocolOps) batch(ctx context.Context, action string, entries []map[string]string) error {
	// The query protocol's result names its entries after the action.
	var out struct {
		Successful []struct{ Id string } `json:"Successful"`
		Sent       []struct{ Id string } `xml:"SendMessageBatchResult>SendMessageBatchResultEntry"`
		Deleted    []struct{ Id string } `xml:"DeleteMessageBatchResult>DeleteMessageBatchResultEntry"`
		Failed     []struct {
			Id, Code, Message string
		} `json:"Failed" xml:"SendMessageBatchResult>BatchResultErrorEntry"`
		NotDeleted []struct {
			Id, Code, Message string
		} `xml:"DeleteMessageBatchResult>BatchResultErrorEntry"`
	}
	if err := o.c.do(ctx, action, map[string]any{"QueueUrl": o.queueURL, "Entries": entries}, &out); err != nil {
		return err
	}
	ok := len(out.Successful) + len(out.Sent) + len(out.Deleted)
	failed := append(out.Failed, out.NotDeleted...)
	if len(failed) > 0 || ok != len(entries) {
		return fmt.Errorf("%s: %d succeeded, %d failed: %+v", action, ok, len(failed), failed)
	}
	return nil
}

func (o protocolOps) send(ctx context.Context, bodies []string) error {
	entries := make([]map[string]string, len(bodies))
	for i, body := range bodies {
		entries[i] = map[string]string{"Id": strconv.Itoa(i), "MessageBody": body}
	}
	return o.batch(ctx, "SendMessageBatch", entries)
}

func (o protocolOps) receive(ctx context.Context) ([]benchMsg, error) {
	var out struct {
		Messages []struct{ Body, ReceiptHandle string } `json:"Messages" xml:"ReceiveMessageResult>Message"`
	}
	if err := o.c.do(ctx, "ReceiveMessage", map[string]any{"QueueUrl": o.queueURL, "MaxNumberOfMessages": benchBatch, "WaitTimeSeconds": 1}, &out); err != nil {
		return nil, err
	}
	ms := make([]benchMsg, len(out.Messages))
	for i, m := range out.Messages {
		ms[i] = benchMsg{body: m.Body, handle: &out.Messages[i].ReceiptHandle}
	}
	return ms, nil
}

func (o protocolOps) delete(ctx context.Context, ms []benchMsg) error {
	entries := make([]map[string]string, len(ms))
	for i, m := range ms {
		entries[i] = map[string]string{"Id": strconv.Itoa(i), "ReceiptHandle": *m.handle}
	}
	return o.batch(ctx, "DeleteMessageBatch", entries)
}

func (o protocolOps) empty(ctx context.Context) error {
	var out struct {
		Attributes map[string]string              `json:"Attributes"`
		Attribute  []struct{ Name, Value string } `xml:"GetQueueAttributesResult>Attribute"`
	}
	names := []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}
	if err := o.c.do(ctx, "GetQueueAttributes", map[string]any{"QueueUrl": o.queueURL, "AttributeNames": names}, &out); err != nil {
		return err
	}
	if out.Attributes == nil {
		out.Attributes = map[string]string{}
	}
	for _, a := range out.Attribute {
		out.Attributes[a.Name] = a.Value
	}
	for _, n := range names {
		if out.Attributes[n] != "0" {
			return fmt.Errorf("the queue is not empty after the run: %v", out.Attributes)
		}
	}
	return nil
}

// BenchmarkSQSProtocols is BenchmarkSQSThroughput through hand-built
// clients of each protocol, on one server per run: json and query run
// the same harness, so that their figures compare the protocols.
func BenchmarkSQSProtocols(b *testing.B) {
	for _, bs := range backends() {
		for _, protocol := range []string{"json", "query"} {
			b.Run(bs.name+"/"+protocol, func(b *testing.B) {
				addr, hc := benchListen(b, bs.open(b, nil))
				base := "http://" + addr + "/"
				var c protocolClient = jsonClient{hc: hc, url: base}
				if protocol == "query" {
					c = queryClient{hc: hc, url: base}
				}
				var created struct {
					QueueUrl string `json:"QueueUrl" xml:"CreateQueueResult>QueueUrl"`
				}
				if err := c.do(context.Background(), "CreateQueue", map[string]any{"QueueName": "bench"}, &created); err != nil {
					b.Fatal(err)
				}
				runThroughput(b, protocolOps{c: c, queueURL: created.QueueUrl})
			})
		}
	}
}
