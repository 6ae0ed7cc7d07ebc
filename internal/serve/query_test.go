package serve_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	neturl "net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The query protocol is tested here against the JSON protocol: each
// action is sent both ways, on twin queues in the same state, and the
// answers must carry the same fields. The XML is read with SQS's shapes
// as botocore's query-era service model states them, written out below
// independently of the server's own tables.

// xmlList is an element an XML answer repeats: the JSON member it
// makes, and for a map the names of its entry's key and value.
type xmlList struct {
	member     string
	key, value string
}

// outputShapes are the repeated elements of each action's result.
var outputShapes = map[string]map[string]xmlList{
	"ListQueues":         {"QueueUrl": {member: "QueueUrls"}},
	"GetQueueAttributes": {"Attribute": {"Attributes", "Name", "Value"}},
	"ListQueueTags":      {"Tag": {"Tags", "Key", "Value"}},
	"ReceiveMessage": {"Message": {member: "Messages"}, "Attribute": {"Attributes", "Name", "Value"},
		"MessageAttribute": {"MessageAttributes", "Name", "Value"}},
	"SendMessageBatch":             {"SendMessageBatchResultEntry": {member: "Successful"}, "BatchResultErrorEntry": {member: "Failed"}},
	"DeleteMessageBatch":           {"DeleteMessageBatchResultEntry": {member: "Successful"}, "BatchResultErrorEntry": {member: "Failed"}},
	"ChangeMessageVisibilityBatch": {"ChangeMessageVisibilityBatchResultEntry": {member: "Successful"}, "BatchResultErrorEntry": {member: "Failed"}},
}

// xmlNode is an element of an XML answer.
type xmlNode struct {
	XMLName  xml.Name
	Text     string    `xml:",chardata"`
	Children []xmlNode `xml:",any"`
}

// fromXML makes an XML result into the JSON protocol's value of it.
func fromXML(n xmlNode, shapes map[string]xmlList) any {
	if len(n.Children) == 0 {
		switch n.XMLName.Local {
		case "SenderFault":
			return n.Text == "true"
		}
		return n.Text
	}
	out := map[string]any{}
	for _, c := range n.Children {
		l, repeated := shapes[c.XMLName.Local]
		switch {
		case !repeated:
			out[c.XMLName.Local] = fromXML(c, shapes)
		case l.key == "":
			list, _ := out[l.member].([]any)
			out[l.member] = append(list, fromXML(c, shapes))
		default:
			m, _ := out[l.member].(map[string]any)
			if m == nil {
				m = map[string]any{}
				out[l.member] = m
			}
			var k string
			var v any
			for _, e := range c.Children {
				switch e.XMLName.Local {
				case l.key:
					k = e.Text
				case l.value:
					v = fromXML(e, shapes)
				}
			}
			m[k] = v
		}
	}
	return out
}

// masked are the fields whose values differ between two queues in the
// same state: ids, handles and times.
var masked = []string{"MessageId", "ReceiptHandle", "SequenceNumber", "SentTimestamp", "ApproximateFirstReceiveTimestamp",
	"CreatedTimestamp", "LastModifiedTimestamp"}

// mask hides the masked fields' values, and leaves out empty lists and
// maps, which flattened XML cannot tell from absent ones.
func mask(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if l, ok := e.([]any); ok && len(l) == 0 {
				delete(v, k)
			} else if m, ok := e.(map[string]any); ok && len(m) == 0 {
				delete(v, k)
			} else if s, ok := e.(string); ok && s != "" && containsString(masked, k) {
				v[k] = "*"
			} else {
				v[k] = mask(e)
			}
		}
	case []any:
		for i := range v {
			v[i] = mask(v[i])
		}
	}
	return v
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// twin is one of the two queues, and what the test remembers of it.
type twin struct {
	url     string
	handles []string
}

// protocolAnswer is an answer in either protocol, as the JSON protocol's
// value: its result, or its error's code.
type protocolAnswer struct {
	status int
	code   string
	result map[string]any
}

// postJSON sends a JSON request to path.
func postJSON(t *testing.T, base, path, action, body string) (protocolAnswer, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := protocolAnswer{status: resp.StatusCode, result: map[string]any{}}
	if resp.StatusCode != 200 {
		out.code, _, _ = strings.Cut(resp.Header.Get("X-Amzn-Query-Error"), ";")
		return out, raw
	}
	if err := json.Unmarshal(raw, &out.result); err != nil {
		t.Fatalf("%s: the JSON answer %q: %v", action, raw, err)
	}
	return out, raw
}

// postForm sends a query request to path; rename, when set, is applied
// to the answer before it is read.
func postForm(t *testing.T, base, path, action string, form neturl.Values, rename *strings.Replacer) (protocolAnswer, []byte) {
	t.Helper()
	form.Set("Action", action)
	form.Set("Version", "2012-11-05")
	resp, err := http.Post(base+path, "application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if rename != nil {
		raw = []byte(rename.Replace(string(raw)))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/xml" {
		t.Fatalf("%s: Content-Type %q, want text/xml: %s", action, ct, raw)
	}
	var root xmlNode
	if err := xml.Unmarshal(raw, &root); err != nil {
		t.Fatalf("%s: the XML answer %q: %v", action, raw, err)
	}
	out := protocolAnswer{status: resp.StatusCode, result: map[string]any{}}
	if resp.StatusCode != 200 {
		var e struct {
			Code string `xml:"Error>Code"`
		}
		_ = xml.Unmarshal(raw, &e)
		out.code = e.Code
		return out, raw
	}
	if root.XMLName.Local != action+"Response" {
		t.Fatalf("%s: answer element %s", action, root.XMLName.Local)
	}
	for _, c := range root.Children {
		if c.XMLName.Local == action+"Result" {
			if r, ok := fromXML(c, outputShapes[action]).(map[string]any); ok {
				out.result = r
			}
		}
	}
	return out, raw
}

// withQueue is a form of the twin's queue URL and the parameters.
func withQueue(q *twin, params map[string]string) neturl.Values {
	v := neturl.Values{"QueueUrl": {q.url}}
	for k, s := range params {
		v.Set(k, s)
	}
	return v
}

// Every action, through the query protocol, answers what it answers
// through the JSON protocol: same status, same error code, same fields.
func TestQueryProtocolMatchesJSON(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		jq, qq := &twin{}, &twin{}
		// same sends one action both ways: the JSON body and the form
		// for each twin, from the twin's queue URL and remembered handles.
		same := func(action, path string, body func(q *twin) string, form func(q *twin) neturl.Values) map[string]any {
			t.Helper()
			ja, jraw := postJSON(t, f.url, path, action, body(jq))
			// The twins' names differ; their answers otherwise do not.
			qa, qraw := postForm(t, f.url, strings.ReplaceAll(path, "json", "query"), action, form(qq), strings.NewReplacer("twin-query", "twin-json"))
			if ja.status != qa.status || ja.code != qa.code || !reflect.DeepEqual(mask(ja.result), mask(qa.result)) {
				t.Fatalf("%s differs:\nJSON  %d %s %v\n%s\nquery %d %s %v\n%s", action, ja.status, ja.code, ja.result, jraw, qa.status, qa.code, qa.result, qraw)
			}
			return ja.result
		}
		none := func(*twin) neturl.Values { return neturl.Values{} }
		same("CreateQueue", "/", func(*twin) string {
			return `{"QueueName":"twin-json","Attributes":{"VisibilityTimeout":"40","DelaySeconds":"0"},"tags":{"team":"a"}}`
		}, func(*twin) neturl.Values {
			return neturl.Values{"QueueName": {"twin-query"}, "Attribute.1.Name": {"VisibilityTimeout"}, "Attribute.1.Value": {"40"},
				"Attribute.2.Name": {"DelaySeconds"}, "Attribute.2.Value": {"0"}, "Tag.1.Key": {"team"}, "Tag.1.Value": {"a"}}
		})
		jq.url, qq.url = f.url+"/000000000000/twin-json", f.url+"/000000000000/twin-query"
		qurl := func(q *twin) neturl.Values { return neturl.Values{"QueueUrl": {q.url}} }
		jurl := func(q *twin) string { return `{"QueueUrl":"` + q.url + `"}` }
		same("GetQueueUrl", "/", func(*twin) string { return `{"QueueName":"twin-json"}` },
			func(*twin) neturl.Values { return neturl.Values{"QueueName": {"twin-query"}} })
		same("GetQueueUrl", "/", func(*twin) string { return `{"QueueName":"missing"}` },
			func(*twin) neturl.Values { return neturl.Values{"QueueName": {"missing"}} })
		same("ListQueues", "/", func(*twin) string { return `{"QueueNamePrefix":"nothing-"}` },
			func(*twin) neturl.Values { return neturl.Values{"QueueNamePrefix": {"nothing-"}} })
		if got := same("ListQueues", "/", func(*twin) string { return `{"QueueNamePrefix":"twin-json"}` },
			func(*twin) neturl.Values { return neturl.Values{"QueueNamePrefix": {"twin-query"}} }); len(got["QueueUrls"].([]any)) != 1 {
			t.Fatalf("ListQueues: %v", got)
		}
		same("SetQueueAttributes", "/", func(q *twin) string {
			return `{"QueueUrl":"` + q.url + `","Attributes":{"MaximumMessageSize":"2048"}}`
		}, func(q *twin) neturl.Values {
			return withQueue(q, map[string]string{"Attribute.1.Name": "MaximumMessageSize", "Attribute.1.Value": "2048"})
		})
		same("SetQueueAttributes", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","Attributes":{"Bogus":"1"}}` },
			func(q *twin) neturl.Values {
				return withQueue(q, map[string]string{"Attribute.1.Name": "Bogus", "Attribute.1.Value": "1"})
			})
		same("TagQueue", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","Tags":{"env":"test","x":"y"}}` },
			func(q *twin) neturl.Values {
				return withQueue(q, map[string]string{"Tag.1.Key": "env", "Tag.1.Value": "test", "Tag.2.Key": "x", "Tag.2.Value": "y"})
			})
		same("UntagQueue", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","TagKeys":["x"]}` },
			func(q *twin) neturl.Values {
				return withQueue(q, map[string]string{"TagKey.1": "x"})
			})
		if got := same("ListQueueTags", "/", jurl, qurl); !reflect.DeepEqual(got["Tags"], map[string]any{"team": "a", "env": "test"}) {
			t.Fatalf("ListQueueTags: %v", got)
		}
		same("SendMessage", "/", func(q *twin) string {
			return `{"QueueUrl":"` + q.url + `","MessageBody":"<one> & \r\n €","DelaySeconds":0,
				"MessageAttributes":{"colour":{"DataType":"String","StringValue":"red"},"n":{"DataType":"Number","StringValue":"1.5"},
				"raw":{"DataType":"Binary","BinaryValue":"AAEC//8="}},
				"MessageSystemAttributes":{"AWSTraceHeader":{"DataType":"String","StringValue":"Root=1-5759e988-bd862e3fe1be46a994272793"}}}`
		}, func(q *twin) neturl.Values {
			return withQueue(q, map[string]string{"MessageBody": "<one> & \r\n €", "DelaySeconds": "0",
				"MessageAttribute.1.Name": "colour", "MessageAttribute.1.Value.DataType": "String", "MessageAttribute.1.Value.StringValue": "red",
				"MessageAttribute.2.Name": "n", "MessageAttribute.2.Value.DataType": "Number", "MessageAttribute.2.Value.StringValue": "1.5",
				"MessageAttribute.3.Name": "raw", "MessageAttribute.3.Value.DataType": "Binary", "MessageAttribute.3.Value.BinaryValue": "AAEC//8=",
				"MessageSystemAttribute.1.Name": "AWSTraceHeader", "MessageSystemAttribute.1.Value.DataType": "String",
				"MessageSystemAttribute.1.Value.StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793"})
		})
		same("SendMessage", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","MessageBody":""}` },
			func(q *twin) neturl.Values {
				return withQueue(q, map[string]string{"MessageBody": ""})
			})
		same("SendMessageBatch", "/", func(q *twin) string {
			return `{"QueueUrl":"` + q.url + `","Entries":[{"Id":"a","MessageBody":"two"},{"Id":"b","MessageBody":"three","DelaySeconds":0},
				{"Id":"c","MessageBody":"late","DelaySeconds":901}]}`
		}, func(q *twin) neturl.Values {
			return withQueue(q, map[string]string{"SendMessageBatchRequestEntry.1.Id": "a", "SendMessageBatchRequestEntry.1.MessageBody": "two",
				"SendMessageBatchRequestEntry.2.Id": "b", "SendMessageBatchRequestEntry.2.MessageBody": "three", "SendMessageBatchRequestEntry.2.DelaySeconds": "0",
				"SendMessageBatchRequestEntry.3.Id": "c", "SendMessageBatchRequestEntry.3.MessageBody": "late", "SendMessageBatchRequestEntry.3.DelaySeconds": "901"})
		})
		same("GetQueueAttributes", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","AttributeNames":["All"]}` },
			func(q *twin) neturl.Values {
				return withQueue(q, map[string]string{"AttributeName.1": "All"})
			})
		// Posted to the queue's URL, without QueueUrl.
		got := same("ReceiveMessage", "/000000000000/twin-json", func(*twin) string {
			return `{"MaxNumberOfMessages":10,"AttributeNames":["All"],"MessageAttributeNames":["All"]}`
		}, func(*twin) neturl.Values {
			return neturl.Values{"MaxNumberOfMessages": {"10"}, "AttributeName.1": {"All"}, "MessageAttributeName.1": {"All"}}
		})
		if len(got["Messages"].([]any)) != 3 {
			t.Fatalf("ReceiveMessage: %v", got)
		}
		handles := func(q *twin, raw map[string]any) {
			for _, m := range raw["Messages"].([]any) {
				q.handles = append(q.handles, m.(map[string]any)["ReceiptHandle"].(string))
			}
		}
		// Both twins afresh: four messages each, received, their handles
		// kept for the actions on handles.
		for _, q := range []*twin{jq, qq} {
			a, _ := postJSON(t, f.url, "/", "PurgeQueue", `{"QueueUrl":"`+q.url+`"}`)
			if a.status != 200 {
				t.Fatalf("PurgeQueue: %v", a)
			}
			for _, body := range []string{"m1", "m2", "m3", "m4"} {
				if a, _ := postJSON(t, f.url, "/", "SendMessage", `{"QueueUrl":"`+q.url+`","MessageBody":"`+body+`"}`); a.status != 200 {
					t.Fatalf("SendMessage: %v", a)
				}
			}
		}
		ja, _ := postJSON(t, f.url, "/", "ReceiveMessage", `{"QueueUrl":"`+jq.url+`","MaxNumberOfMessages":10}`)
		qa, qraw := postForm(t, f.url, "/", "ReceiveMessage", neturl.Values{"QueueUrl": {qq.url}, "MaxNumberOfMessages": {"10"}}, nil)
		handles(jq, ja.result)
		handles(qq, qa.result)
		if len(jq.handles) != 4 || len(qq.handles) != 4 {
			t.Fatalf("received %d and %d messages, want 4 each: %s", len(jq.handles), len(qq.handles), qraw)
		}
		same("ChangeMessageVisibility", "/", func(q *twin) string {
			return `{"QueueUrl":"` + q.url + `","ReceiptHandle":"` + q.handles[0] + `","VisibilityTimeout":60}`
		}, func(q *twin) neturl.Values {
			return withQueue(q, map[string]string{"ReceiptHandle": q.handles[0], "VisibilityTimeout": "60"})
		})
		same("ChangeMessageVisibilityBatch", "/", func(q *twin) string {
			return `{"QueueUrl":"` + q.url + `","Entries":[{"Id":"a","ReceiptHandle":"` + q.handles[1] + `","VisibilityTimeout":60},
				{"Id":"b","ReceiptHandle":"forged","VisibilityTimeout":60}]}`
		}, func(q *twin) neturl.Values {
			return withQueue(q, map[string]string{"ChangeMessageVisibilityBatchRequestEntry.1.Id": "a",
				"ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle": q.handles[1], "ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout": "60",
				"ChangeMessageVisibilityBatchRequestEntry.2.Id": "b", "ChangeMessageVisibilityBatchRequestEntry.2.ReceiptHandle": "forged",
				"ChangeMessageVisibilityBatchRequestEntry.2.VisibilityTimeout": "60"})
		})
		same("DeleteMessage", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","ReceiptHandle":"` + q.handles[0] + `"}` },
			func(q *twin) neturl.Values {
				return withQueue(q, map[string]string{"ReceiptHandle": q.handles[0]})
			})
		same("DeleteMessage", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","ReceiptHandle":"forged"}` },
			func(q *twin) neturl.Values {
				return withQueue(q, map[string]string{"ReceiptHandle": "forged"})
			})
		same("DeleteMessageBatch", "/", func(q *twin) string {
			return `{"QueueUrl":"` + q.url + `","Entries":[{"Id":"a","ReceiptHandle":"` + q.handles[1] + `"},{"Id":"b","ReceiptHandle":"` +
				q.handles[2] + `"},{"Id":"c","ReceiptHandle":"forged"}]}`
		}, func(q *twin) neturl.Values {
			return withQueue(q, map[string]string{"DeleteMessageBatchRequestEntry.1.Id": "a", "DeleteMessageBatchRequestEntry.1.ReceiptHandle": q.handles[1],
				"DeleteMessageBatchRequestEntry.2.Id": "b", "DeleteMessageBatchRequestEntry.2.ReceiptHandle": q.handles[2],
				"DeleteMessageBatchRequestEntry.3.Id": "c", "DeleteMessageBatchRequestEntry.3.ReceiptHandle": "forged"})
		})
		same("AddPermission", "/", func(q *twin) string {
			return `{"QueueUrl":"` + q.url + `","Label":"share","AWSAccountIds":["111111111111"],"Actions":["SendMessage","ReceiveMessage"]}`
		}, func(q *twin) neturl.Values {
			return withQueue(q, map[string]string{"Label": "share", "AWSAccountId.1": "111111111111", "ActionName.1": "SendMessage", "ActionName.2": "ReceiveMessage"})
		})
		same("GetQueueAttributes", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","AttributeNames":["Policy"]}` },
			func(q *twin) neturl.Values { return withQueue(q, map[string]string{"AttributeName.1": "Policy"}) })
		same("RemovePermission", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","Label":"share"}` },
			func(q *twin) neturl.Values { return withQueue(q, map[string]string{"Label": "share"}) })
		same("RemovePermission", "/", func(q *twin) string { return `{"QueueUrl":"` + q.url + `","Label":"share"}` },
			func(q *twin) neturl.Values { return withQueue(q, map[string]string{"Label": "share"}) })
		same("DeleteMessageBatch", "/", jurl, qurl)
		same("PurgeQueue", "/", jurl, qurl)
		same("DeleteQueue", "/000000000000/twin-json", func(*twin) string { return `{}` }, none)
		same("DeleteQueue", "/000000000000/twin-json", func(*twin) string { return `{}` }, none)
	})
}

// signForm signs a query request as botocore does: the form's hash, over
// host, Content-Type and X-Amz-Date.
func signForm(t *testing.T, req *http.Request, form, key, secret string, at time.Time) {
	t.Helper()
	sum := sha256.Sum256([]byte(form))
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, req,
		hex.EncodeToString(sum[:]), "sqs", "us-east-1", at)
	if err != nil {
		t.Fatal(err)
	}
}

// The query protocol on a server with credentials: a signed form is
// served, an unsigned or wrongly signed one refused with the signer's
// code, in XML, and nothing changes.
func TestQueryProtocolSigned(t *testing.T) {
	f := setup(t, backends()[0], options{signed: true})
	post := func(path, form, key, secret string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, f.url+path, strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		if key != "" {
			signForm(t, req, form, key, secret, f.clk.Now())
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/", "Action=CreateQueue&QueueName=signed", testKey, testSecret); code != 200 || !strings.Contains(body, "<QueueUrl>") {
		t.Fatalf("signed CreateQueue: %d %s", code, body)
	}
	for _, tc := range []struct {
		key, secret, code string
	}{{"", "", "MissingAuthenticationToken"}, {testKey, "a-wrong-secret-of-some-length", "SignatureDoesNotMatch"}} {
		code, body := post("/000000000000/signed", "Action=SendMessage&MessageBody=x", tc.key, tc.secret)
		if code != 403 || !strings.Contains(body, "<Code>"+tc.code+"</Code>") || !strings.Contains(body, "<ErrorResponse") {
			t.Fatalf("SendMessage signed with %q: %d %s; want 403 %s", tc.secret, code, body, tc.code)
		}
	}
	code, body := post("/000000000000/signed", "Action=SendMessage&MessageBody=x", testKey, testSecret)
	if code != 200 {
		t.Fatalf("signed SendMessage at the queue's URL: %d %s", code, body)
	}
	if got := f.attrs(f.url + "/000000000000/signed")["ApproximateNumberOfMessages"]; got != "1" {
		t.Fatalf("%s messages, want the one signed send", got)
	}
}

// Queue URLs take API requests in both protocols; a GET is the API's
// only when it names an action; the dashboard keeps its pages; the
// metrics count query requests by action.
func TestQueueURLsAndRoutes(t *testing.T) {
	f, _ := running(t, backends()[0])
	url := f.createQueue("routed", nil)
	if a, raw := postForm(t, f.url, "/000000000000/routed", "SendMessage", neturl.Values{"MessageBody": {"by form"}}, nil); a.status != 200 {
		t.Fatalf("query SendMessage at the queue's URL: %s", raw)
	}
	if a, raw := postJSON(t, f.url, "/000000000000/routed", "SendMessage", `{"MessageBody":"by JSON"}`); a.status != 200 {
		t.Fatalf("JSON SendMessage at the queue's URL: %s", raw)
	}
	if got := bodies(f.receive(url, 10, 30)); len(got) != 2 {
		t.Fatalf("received %v, want both sends", got)
	}
	if a, _ := postForm(t, f.url, "/000000000000/nope", "SendMessage", neturl.Values{"MessageBody": {"x"}}, nil); a.status != 400 || a.code != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("SendMessage at a missing queue's URL: %+v", a)
	}
	for _, tc := range []struct {
		path string
		code int
		has  string
	}{
		{"/000000000000/routed", 404, "<UnknownOperationException"},
		{"/000000000000/routed?Action=GetQueueAttributes&AttributeName.1=VisibilityTimeout", 200, "<Name>VisibilityTimeout</Name><Value>30</Value>"},
		{"/?Action=ListQueues&QueueNamePrefix=rout", 200, "<QueueUrl>" + url + "</QueueUrl>"},
		{"/", 200, "<html"},
		{"/queues/routed", 200, "routed"},
		{"/111111111111/routed", 404, "404 page not found"},
	} {
		code, body := get(t, f.url+tc.path)
		if code != tc.code || !strings.Contains(body, tc.has) {
			t.Errorf("GET %s: %d %.300s; want %d with %q", tc.path, code, body, tc.code, tc.has)
		}
	}
	code, body := get(t, f.url+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range [][]string{
		{"leasehold_sqs_requests_total{", `action="SendMessage"`, `outcome="ok"`, "} 2"},
		{"leasehold_sqs_requests_total{", `action="SendMessage"`, `outcome="AWS.SimpleQueueService.NonExistentQueue"`, "} 1"},
		{"leasehold_sqs_requests_total{", `action="ListQueues"`, `outcome="ok"`, "} 1"},
		{"leasehold_sqs_requests_total{", `action="GetQueueAttributes"`, `outcome="ok"`, "} 1"},
	} {
		if !hasSample(body, want) {
			t.Errorf("/metrics has no line with %q", want)
		}
	}
}
