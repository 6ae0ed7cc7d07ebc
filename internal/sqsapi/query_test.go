package sqsapi

import (
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// formRequest is a query request of the form, posted to path.
func formRequest(path, form string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://h:1"+path, strings.NewReader(form))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	return r
}

// decodeForm decodes form into v as action's input.
func decodeForm(t *testing.T, action, form string, v any) *apiError {
	t.Helper()
	r := formRequest("/", form)
	root, err := parseForm(r, []byte(form))
	if err != nil {
		return err
	}
	return root.decode(v, action)
}

// A form decodes into an action's input struct as its JSON does: scalars,
// numbers as text, lists and maps flattened under their query names,
// binary values in base64, embedded structs, and elements in the order of
// their indexes, whatever the order of the parameters.
func TestFormDecodesAsJSON(t *testing.T) {
	type receiveInput struct {
		queueInput
		MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
		VisibilityTimeout           *int     `json:"VisibilityTimeout"`
		AttributeNames              []string `json:"AttributeNames"`
		MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
		MessageAttributeNames       []string `json:"MessageAttributeNames"`
	}
	type createInput struct {
		QueueName  string            `json:"QueueName"`
		Attributes map[string]string `json:"Attributes"`
		Tags       map[string]string `json:"tags"`
	}
	type sendInput struct {
		queueInput
		sendEntry
	}
	type untagInput struct {
		queueInput
		TagKeys []string `json:"TagKeys"`
	}
	for _, tc := range []struct {
		action, form, json string
		v                  func() any
	}{
		{"SendMessageBatch",
			"Action=SendMessageBatch&QueueUrl=http%3A%2F%2Fh%2F000000000000%2Fq" +
				"&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=two+%26+more&SendMessageBatchRequestEntry.2.DelaySeconds=5" +
				"&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=one" +
				"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=colour&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=String" +
				"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=red" +
				"&SendMessageBatchRequestEntry.1.MessageAttribute.2.Name=raw&SendMessageBatchRequestEntry.1.MessageAttribute.2.Value.DataType=Binary" +
				"&SendMessageBatchRequestEntry.1.MessageAttribute.2.Value.BinaryValue=AAEC%2F%2F8%3D" +
				"&SendMessageBatchRequestEntry.1.MessageSystemAttribute.1.Name=AWSTraceHeader" +
				"&SendMessageBatchRequestEntry.1.MessageSystemAttribute.1.Value.DataType=String" +
				"&SendMessageBatchRequestEntry.1.MessageSystemAttribute.1.Value.StringValue=Root%3D1" +
				"&SendMessageBatchRequestEntry.1.MessageGroupId=g&SendMessageBatchRequestEntry.1.MessageDeduplicationId=d" +
				"&Version=2012-11-05&Unknown.1.Thing=ignored&SendMessageBatchRequestEntry.1.Unknown=ignored",
			`{"QueueUrl":"http://h/000000000000/q","Entries":[
				{"Id":"a","MessageBody":"one","MessageGroupId":"g","MessageDeduplicationId":"d",
				 "MessageAttributes":{"colour":{"DataType":"String","StringValue":"red"},"raw":{"DataType":"Binary","BinaryValue":"AAEC//8="}},
				 "MessageSystemAttributes":{"AWSTraceHeader":{"DataType":"String","StringValue":"Root=1"}}},
				{"Id":"b","MessageBody":"two & more","DelaySeconds":5}]}`,
			func() any { return &sendBatch{} }},
		{"SendMessage",
			"Action=SendMessage&QueueUrl=q&MessageBody=%E2%82%AC+x&DelaySeconds=0",
			`{"QueueUrl":"q","MessageBody":"€ x","DelaySeconds":0}`,
			func() any { return &sendInput{} }},
		{"ReceiveMessage",
			"Action=ReceiveMessage&QueueUrl=q&MaxNumberOfMessages=10&VisibilityTimeout=-1&AttributeName.2=SentTimestamp&AttributeName.1=All" +
				"&MessageAttributeName.1=All&MessageSystemAttributeName.1=MessageGroupId",
			`{"QueueUrl":"q","MaxNumberOfMessages":10,"VisibilityTimeout":-1,"AttributeNames":["All","SentTimestamp"],
			  "MessageAttributeNames":["All"],"MessageSystemAttributeNames":["MessageGroupId"]}`,
			func() any { return &receiveInput{} }},
		{"CreateQueue",
			"Action=CreateQueue&QueueName=q.fifo&Attribute.1.Name=FifoQueue&Attribute.1.Value=true&Attribute.2.Name=DelaySeconds&Attribute.2.Value=" +
				"&Tag.1.Key=team&Tag.1.Value=a&Tag.2.Key=env&Tag.2.Value=",
			`{"QueueName":"q.fifo","Attributes":{"FifoQueue":"true","DelaySeconds":""},"tags":{"team":"a","env":""}}`,
			func() any { return &createInput{} }},
		{"DeleteMessageBatch",
			"Action=DeleteMessageBatch&QueueUrl=q&DeleteMessageBatchRequestEntry.1.Id=x&DeleteMessageBatchRequestEntry.1.ReceiptHandle=h1",
			`{"QueueUrl":"q","Entries":[{"Id":"x","ReceiptHandle":"h1"}]}`,
			func() any { return &handleBatch{} }},
		{"ChangeMessageVisibilityBatch",
			"Action=ChangeMessageVisibilityBatch&QueueUrl=q&ChangeMessageVisibilityBatchRequestEntry.1.Id=x" +
				"&ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle=h1&ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout=30",
			`{"QueueUrl":"q","Entries":[{"Id":"x","ReceiptHandle":"h1","VisibilityTimeout":30}]}`,
			func() any { return &handleBatch{} }},
		{"AddPermission", "Action=AddPermission&QueueUrl=q&Label=l&AWSAccountId.1=111111111111&AWSAccountId.2=222222222222&ActionName.1=SendMessage",
			`{"QueueUrl":"q","Label":"l","AWSAccountIds":["111111111111","222222222222"],"Actions":["SendMessage"]}`,
			func() any {
				return &struct {
					queueInput
					Label         string   `json:"Label"`
					AWSAccountIds []string `json:"AWSAccountIds"`
					Actions       []string `json:"Actions"`
				}{}
			}},
		{"UntagQueue", "Action=UntagQueue&QueueUrl=q&TagKey.1=team&TagKey.2=env",
			`{"QueueUrl":"q","TagKeys":["team","env"]}`,
			func() any { return &untagInput{} }},
	} {
		t.Run(tc.action, func(t *testing.T) {
			fromForm, fromJSON := tc.v(), tc.v()
			if err := decodeForm(t, tc.action, tc.form, fromForm); err != nil {
				t.Fatalf("decode the form: %v", err)
			}
			if err := json.Unmarshal([]byte(tc.json), fromJSON); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromForm, fromJSON) {
				a, _ := json.Marshal(fromForm)
				b, _ := json.Marshal(fromJSON)
				t.Fatalf("the form decodes to\n%s\nits JSON to\n%s", a, b)
			}
		})
	}
}

// repeat is n parameters made by f(i), i from 1.
func repeat(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i + 1)
	}
	return strings.Join(parts, "&")
}

// Bad forms are refused with SQS's error codes, as the same mistakes in
// JSON are, and the limits hold while the form is read, before any of it
// is decoded.
func TestFormRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, form, code, msg string
	}{
		{"a letter for an index", "QueueName=q&Attribute.x.Name=DelaySeconds", "InvalidParameterValue", `malformed index "x"`},
		{"index 0", "QueueName=q&Attribute.0.Name=DelaySeconds", "InvalidParameterValue", `malformed index "0"`},
		{"a leading zero", "QueueName=q&Attribute.01.Name=DelaySeconds", "InvalidParameterValue", `malformed index "01"`},
		{"a signed index", "QueueName=q&Attribute.%2B1.Name=DelaySeconds", "InvalidParameterValue", `malformed index "+1"`},
		{"a thousand attributes", "QueueName=q&" + repeat(1000, func(i int) string {
			return "Attribute." + strconv.Itoa(i) + ".Name=A" + strconv.Itoa(i) + "&Attribute." + strconv.Itoa(i) + ".Value=1"
		}), "InvalidParameterValue", "the parameter Attribute holds more than 100 members"},
		{"a hundred and one entries", repeat(101, func(i int) string {
			return "SendMessageBatchRequestEntry." + strconv.Itoa(i) + ".Id=e" + strconv.Itoa(i)
		}), "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent more than 100."},
		{"eleven message attributes", "MessageBody=x&" + repeat(11, func(i int) string {
			return "MessageAttribute." + strconv.Itoa(i) + ".Name=a" + strconv.Itoa(i)
		}), "InvalidParameterValue", "at most 10 are allowed"},
		{"too many parameters", repeat(maxFormParams+1, func(i int) string {
			return "P" + strconv.Itoa(i%50) + "." + strconv.Itoa(i) + "=x"
		}), "InvalidParameterValue", "more than 1000 parameters"},
		{"too many at the top", repeat(101, func(i int) string { return "P" + strconv.Itoa(i) + "=x" }),
			"InvalidParameterValue", "the request holds more than 100 members"},
		{"too deep", "QueueName=q&" + strings.Repeat("A.", 20) + "B=1", "InvalidParameterValue", "nests deeper than 16 levels"},
		{"a parameter twice", "QueueName=q&QueueName=r", "InvalidParameterValue", "QueueName is given more than once"},
		{"a body not UTF-8", "QueueUrl=q&MessageBody=%FF", "InvalidMessageContents", "the message body holds invalid UTF-8"},
		{"an attribute value not UTF-8", "MessageAttribute.1.Value.StringValue=%ED%A0%80", "InvalidParameterValue", "invalid UTF-8"},
		{"bad escapes", "QueueName=%zz", "InvalidParameterValue", "is not url-encoded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseForm(formRequest("/", tc.form), []byte(tc.form))
			if err == nil || err.code != tc.code || !strings.Contains(err.message, tc.msg) {
				t.Fatalf("parseForm: %v; want %s with %q", err, tc.code, tc.msg)
			}
		})
	}
	for _, tc := range []struct {
		name, form, msg string
		v               any
	}{
		{"a number that is not", "QueueUrl=q&MaxNumberOfMessages=ten", `value "ten" for parameter MaxNumberOfMessages is invalid`,
			&struct {
				MaxNumberOfMessages *int `json:"MaxNumberOfMessages"`
			}{}},
		{"binary that is not base64", "MessageAttribute.1.Name=b&MessageAttribute.1.Value.DataType=Binary&MessageAttribute.1.Value.BinaryValue=%21%21",
			"MessageAttribute.1.Value.BinaryValue is not base64", &sendEntry{}},
		{"a map entry without its name", "Attribute.1.Value=5", "The request must contain the parameter Attribute.1.Name.",
			&struct {
				Attributes map[string]string `json:"Attributes"`
			}{}},
		{"a name twice in a map", "Attribute.1.Name=DelaySeconds&Attribute.1.Value=1&Attribute.2.Name=DelaySeconds&Attribute.2.Value=2",
			`Attribute.2.Name names "DelaySeconds"`, &struct {
				Attributes map[string]string `json:"Attributes"`
			}{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeForm(t, "SendMessage", tc.form, tc.v)
			if err == nil || !strings.Contains(err.message, tc.msg) {
				t.Fatalf("decode: %v; want an error with %q", err, tc.msg)
			}
		})
	}
}

// queryAnswer is an XML answer, read loosely: the result's elements by
// their path, and an error's.
type queryAnswer struct {
	status  int
	header  http.Header
	body    string
	XMLName xml.Name
	Error   struct {
		Type, Code, Message string
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

func (b bundle) query(t *testing.T, r *http.Request) queryAnswer {
	t.Helper()
	w := httptest.NewRecorder()
	b.api.ServeHTTP(w, r)
	out := queryAnswer{status: w.Code, header: w.Header(), body: w.Body.String()}
	if err := xml.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("the answer is not XML: %v\n%s", err, w.Body.String())
	}
	return out
}

// The query protocol's answers: XML in SQS's shapes, errors with their
// query codes and the JSON protocol's statuses, the action from the body
// or the URL, and a request without one refused.
func TestQueryAnswers(t *testing.T) {
	b := setup(t, nil)
	a := b.query(t, formRequest("/", "Action=CreateQueue&QueueName=q&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=40&Version=2012-11-05"))
	want := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<CreateQueueResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><CreateQueueResult><QueueUrl>http://h:1/000000000000/q</QueueUrl></CreateQueueResult><ResponseMetadata><RequestId>` +
		a.header.Get("X-Amzn-Requestid") + `</RequestId></ResponseMetadata></CreateQueueResponse>`
	if a.status != 200 || a.body != want || a.header.Get("Content-Type") != "text/xml" {
		t.Fatalf("CreateQueue: %d %s %s\nwant %s", a.status, a.header.Get("Content-Type"), a.body, want)
	}

	send := "Action=SendMessage&QueueUrl=http%3A%2F%2Fh%3A1%2F000000000000%2Fq&MessageBody=%3Cb%3E+%26+%0D%0A&MessageAttribute.1.Name=raw" +
		"&MessageAttribute.1.Value.DataType=Binary&MessageAttribute.1.Value.BinaryValue=AAEC"
	a = b.query(t, formRequest("/", send))
	if a.status != 200 || !strings.Contains(a.body, "<SendMessageResult><MessageId>") || !strings.Contains(a.body, "</MessageId><MD5OfMessageBody>") || !strings.Contains(a.body, "<MessageId>") {
		t.Fatalf("SendMessage: %d %s", a.status, a.body)
	}
	// Posted to the queue's URL, without QueueUrl, the action in the URL.
	r := formRequest("/000000000000/q?Action=ReceiveMessage", "AttributeName.1=ApproximateReceiveCount&MessageAttributeName.1=All")
	a = b.query(t, r)
	var got struct {
		Message []struct {
			Body             string
			Attribute        []struct{ Name, Value string }
			MessageAttribute []struct {
				Name  string
				Value struct{ DataType, BinaryValue string }
			}
		} `xml:"ReceiveMessageResult>Message"`
	}
	if err := xml.Unmarshal([]byte(a.body), &got); err != nil || len(got.Message) != 1 {
		t.Fatalf("ReceiveMessage: %v %s", err, a.body)
	}
	m := got.Message[0]
	if m.Body != "<b> & \r\n" || len(m.Attribute) != 1 || m.Attribute[0] != (struct{ Name, Value string }{"ApproximateReceiveCount", "1"}) ||
		len(m.MessageAttribute) != 1 || m.MessageAttribute[0].Name != "raw" || m.MessageAttribute[0].Value.BinaryValue != "AAEC" {
		t.Fatalf("received %+v from\n%s", m, a.body)
	}
	// An action without output answers its response without a result.
	a = b.query(t, formRequest("/000000000000/q", "Action=PurgeQueue"))
	if a.status != 200 || a.XMLName.Local != "PurgeQueueResponse" || strings.Contains(a.body, "Result") {
		t.Fatalf("PurgeQueue: %d %s", a.status, a.body)
	}

	for _, tc := range []struct {
		r           *http.Request
		status      int
		code, fault string
		inMessage   string
	}{
		{formRequest("/", "Action=GetQueueUrl&QueueName=nope"), 400, "AWS.SimpleQueueService.NonExistentQueue", "Sender", "The specified queue does not exist for this wsdl version."},
		{formRequest("/", "Version=2012-11-05"), 400, "MissingAction", "Sender", "must contain the parameter Action"},
		{formRequest("/", "Action=FooBar"), 400, "InvalidAction", "Sender", "The action FooBar is not valid for this endpoint."},
		{formRequest("/000000000000/q", "Action=AddPermission&Label=l&AWSAccountId.1=1&ActionName.1=SendMessage"), 400, "InvalidParameterValue", "Sender", "Value [1] for parameter PrincipalId"},
		{formRequest("/", "Action=SendMessage&MessageBody=x"), 400, "MissingParameter", "Sender", "QueueUrl"},
		{httptest.NewRequest(http.MethodPut, "http://h:1/?Action=ListQueues", nil), 400, "InvalidAction", "Sender", "not PUT"},
	} {
		a := b.query(t, tc.r)
		if a.status != tc.status || a.XMLName.Local != "ErrorResponse" || a.Error.Code != tc.code || a.Error.Type != tc.fault ||
			!strings.Contains(a.Error.Message, tc.inMessage) || a.RequestID == "" || a.RequestID != a.header.Get("X-Amzn-Requestid") {
			t.Errorf("%s %s: %d %s\nwant %d %s (%s) with %q", tc.r.Method, tc.r.URL, a.status, a.body, tc.status, tc.code, tc.fault, tc.inMessage)
		}
	}

	// GET with the parameters in the URL, as SQS takes it.
	q := url.Values{"Action": {"GetQueueAttributes"}, "QueueUrl": {"http://h:1/000000000000/q"}, "AttributeName.1": {"VisibilityTimeout"}}
	a = b.query(t, httptest.NewRequest(http.MethodGet, "http://h:1/?"+q.Encode(), nil))
	if a.status != 200 || !strings.Contains(a.body, "<GetQueueAttributesResult><Attribute><Name>VisibilityTimeout</Name><Value>40</Value></Attribute></GetQueueAttributesResult>") {
		t.Fatalf("GET GetQueueAttributes: %d %s", a.status, a.body)
	}
	// A JSON request still gets JSON, its errors too; and a JSON request
	// posted to a queue's URL without QueueUrl acts on that queue.
	j := b.call(t, "GetQueueUrl", `{"QueueName":"nope"}`)
	if j.status != 400 || j.Type != "QueueDoesNotExist" || j.header.Get("Content-Type") != contentType {
		t.Fatalf("JSON error: %+v", j)
	}
	jr := request("GetQueueAttributes", `{"AttributeNames":["VisibilityTimeout"]}`)
	jr.URL.Path = "/000000000000/q"
	if j := b.do(t, jr); j.status != 200 || !strings.Contains(string(j.body), `"VisibilityTimeout":"40"`) {
		t.Fatalf("JSON at the queue's URL: %d %s", j.status, j.body)
	}
}

// The XML encoder writes every output the way SQS does: batches'
// entries flattened under their action's names, booleans as text, maps
// as Name/Value (or Key/Value) entries in key order, and an empty result
// as an empty element.
func TestXMLOutputs(t *testing.T) {
	out := batchOutput[sent]{Successful: []sent{{Id: "a", MessageId: "1", MD5OfMessageBody: "m"}},
		Failed: []batchFailure{{Id: "b", SenderFault: true, Code: "InvalidParameterValue", Message: "x < y"}}}
	var b strings.Builder
	if err := encodeXML(&b, "SendMessageBatch", "r1", out); err != nil {
		t.Fatal(err)
	}
	want := `<SendMessageBatchResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><SendMessageBatchResult>` +
		`<SendMessageBatchResultEntry><Id>a</Id><MessageId>1</MessageId><MD5OfMessageBody>m</MD5OfMessageBody></SendMessageBatchResultEntry>` +
		`<BatchResultErrorEntry><Id>b</Id><SenderFault>true</SenderFault><Code>InvalidParameterValue</Code><Message>x &lt; y</Message></BatchResultErrorEntry>` +
		`</SendMessageBatchResult><ResponseMetadata><RequestId>r1</RequestId></ResponseMetadata></SendMessageBatchResponse>`
	if got := strings.TrimPrefix(b.String(), xml.Header); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	b.Reset()
	tags := struct {
		Tags map[string]string `json:"Tags,omitempty"`
	}{map[string]string{"z": "1", "a": "2"}}
	if err := encodeXML(&b, "ListQueueTags", "r2", tags); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<ListQueueTagsResult><Tag><Key>a</Key><Value>2</Value></Tag><Tag><Key>z</Key><Value>1</Value></Tag></ListQueueTagsResult>") {
		t.Fatalf("tags: %s", b.String())
	}
	// A result with nothing in it is an empty element.
	b.Reset()
	if err := encodeXML(&b, "ReceiveMessage", "r3", struct {
		Messages []message `json:"Messages,omitempty"`
	}{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "><ReceiveMessageResult/><ResponseMetadata>") {
		t.Fatalf("empty receive: %s", b.String())
	}
}

// Whatever form a client sends, the API answers in XML with its output
// or an error of the sender's, never a failure of its own.
func FuzzQueryAPI(f *testing.F) {
	for _, s := range []string{
		"Action=SendMessage&QueueUrl=%2Fq&MessageBody=x&MessageAttribute.1.Name=a&MessageAttribute.1.Value.DataType=Number&MessageAttribute.1.Value.StringValue=1",
		"Action=SendMessageBatch&QueueUrl=%2Fq&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=1&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=2",
		"Action=ReceiveMessage&QueueUrl=%2Fq&MaxNumberOfMessages=10&AttributeName.1=All&MessageAttributeName.1=All",
		"Action=CreateQueue&QueueName=f.fifo&Attribute.1.Name=FifoQueue&Attribute.1.Value=true&Tag.1.Key=k&Tag.1.Value=v",
		"Action=DeleteMessageBatch&QueueUrl=%2Fq&DeleteMessageBatchRequestEntry.1.Id=a&DeleteMessageBatchRequestEntry.1.ReceiptHandle=1.1",
		"Action=SetQueueAttributes&QueueUrl=%2Fq&Attribute.1.Name=DelaySeconds&Attribute.1.Value=901",
		"Action=UntagQueue&QueueUrl=%2Fq&TagKey.1=k",
		"Action=SendMessage&QueueUrl=%2Fq&MessageBody=%ED%A0%80",
		"Action=SendMessage&MessageAttribute.1.Value.BinaryValue=%%%",
		"Action=ListQueues&MaxResults=x",
		"Action=CreateQueue&Attribute.9999999999999999999999.Name=a",
		"Action",
		"&&&=&=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, form string) {
		b := setup(t, nil)
		b.query(t, formRequest("/", "Action=CreateQueue&QueueName=q"))
		a := b.query(t, formRequest("/000000000000/q", form))
		switch {
		case a.status == http.StatusOK && a.XMLName.Local != "ErrorResponse":
		case a.status >= 500:
			t.Fatalf("%q: status %d %s", form, a.status, a.body)
		case a.XMLName.Local != "ErrorResponse" || a.Error.Code == "" || a.Error.Message == "" || a.Error.Type != "Sender":
			t.Fatalf("%q: status %d without SQS's error shape: %s", form, a.status, a.body)
		}
	})
}

// A server that checks no signatures refuses what a web page's browser
// sends it (a form POST or a GET a page may send anywhere unasked), and
// changes nothing; the same request from a client is served.
func TestRequestsFromWebPagesAreRefusedWithoutSignatures(t *testing.T) {
	b := setup(t, nil)
	if a := b.query(t, formRequest("/", "Action=CreateQueue&QueueName=victim")); a.status != 200 {
		t.Fatalf("CreateQueue: %d %s", a.status, a.body)
	}
	for name, mark := range map[string]func(r *http.Request){
		"Origin":                    func(r *http.Request) { r.Header.Set("Origin", "https://elsewhere.example") },
		"Sec-Fetch-Site cross-site": func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") },
		"Sec-Fetch-Site same-site":  func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") },
	} {
		for _, r := range []*http.Request{
			formRequest("/", "Action=DeleteQueue&QueueUrl=victim"),
			httptest.NewRequest(http.MethodGet, "http://h:1/000000000000/victim?Action=PurgeQueue", nil),
		} {
			mark(r)
			if a := b.query(t, r); a.status != http.StatusForbidden || a.Error.Code != "AccessDenied" {
				t.Errorf("%s %s with %s: %d %s, want 403 AccessDenied", r.Method, r.URL, name, a.status, a.body)
			}
		}
	}
	if a := b.query(t, formRequest("/", "Action=GetQueueUrl&QueueName=victim")); a.status != 200 {
		t.Fatalf("the queue is gone after refused requests: %d %s", a.status, a.body)
	}
}

// ListDeadLetterSourceQueues answers the query protocol with each source
// queue's URL as a QueueUrl element, as the JSON protocol lists them.
func TestQueryListsDeadLetterSources(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"dlq"}`)
	policy := url.QueryEscape(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"3"}`)
	for _, n := range []string{"a", "b"} {
		if a := b.query(t, formRequest("/", "Action=CreateQueue&QueueName="+n+"&Attribute.1.Name=RedrivePolicy&Attribute.1.Value="+policy)); a.status != 200 {
			t.Fatalf("CreateQueue %s: %d %s", n, a.status, a.body)
		}
	}
	a := b.query(t, formRequest("/000000000000/dlq", "Action=ListDeadLetterSourceQueues"))
	want := "<ListDeadLetterSourceQueuesResult><QueueUrl>http://h:1/000000000000/a</QueueUrl><QueueUrl>http://h:1/000000000000/b</QueueUrl></ListDeadLetterSourceQueuesResult>"
	if a.status != 200 || !strings.Contains(a.body, want) {
		t.Fatalf("ListDeadLetterSourceQueues: %d %s\nwant %s", a.status, a.body, want)
	}
}

// A query request that accepts JSON is answered in JSON in Amazon SQS's
// shape: the response's tree under its action's name, maps as lists of
// their entries, lists of queue URLs and messages under their lower-case
// names, and errors as Error with Code, Message and Type.
func TestQueryAnswersJSONWhenAccepted(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q","Attributes":{"VisibilityTimeout":"40"}}`)
	b.call(t, "SendMessage", `{"QueueUrl":"q","MessageBody":"hi \"there\"\r"}`)
	get := func(path, query, accept string) (int, string, map[string]any) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "http://h:1"+path+"?"+query, nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		b.api.ServeHTTP(w, r)
		var doc map[string]any
		if w.Header().Get("Content-Type") == "application/json" {
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
				t.Fatalf("%s: not JSON: %v\n%s", query, err, w.Body.String())
			}
		}
		return w.Code, w.Body.String(), doc
	}
	status, body, doc := get("/", "Action=ListQueues&Version=2012-11-05", "application/json")
	id := func(resp map[string]any) any { return resp["ResponseMetadata"].(map[string]any)["RequestId"] }
	resp, _ := doc["ListQueuesResponse"].(map[string]any)
	if status != 200 || resp == nil || id(resp) == "" ||
		!reflect.DeepEqual(resp["ListQueuesResult"], map[string]any{"queueUrls": []any{"http://h:1/000000000000/q"}}) {
		t.Fatalf("ListQueues: %d %s", status, body)
	}
	if status, body, _ := get("/", "Action=ListQueues", "text/xml, application/json"); status != 200 || !strings.Contains(body, "<ListQueuesResponse") {
		t.Fatalf("ListQueues accepting XML first: %d %s", status, body)
	}
	if status, body, _ := get("/", "Action=ListQueues", ""); status != 200 || !strings.Contains(body, "<ListQueuesResponse") {
		t.Fatalf("ListQueues without Accept: %d %s", status, body)
	}

	_, body, doc = get("/000000000000/q", "Action=GetQueueAttributes&AttributeName.1=VisibilityTimeout", "application/json")
	want := map[string]any{"GetQueueAttributesResponse": map[string]any{
		"GetQueueAttributesResult": map[string]any{"Attributes": []any{map[string]any{"Name": "VisibilityTimeout", "Value": "40"}}},
		"ResponseMetadata":         map[string]any{"RequestId": id(doc["GetQueueAttributesResponse"].(map[string]any))},
	}}
	if !reflect.DeepEqual(doc, want) {
		t.Fatalf("GetQueueAttributes: %s\nwant %v", body, want)
	}

	_, body, doc = get("/", "Action=ReceiveMessage&QueueUrl=http%3A%2F%2Fh%3A1%2F000000000000%2Fq&AttributeName.1=ApproximateReceiveCount", "application/json")
	result := doc["ReceiveMessageResponse"].(map[string]any)["ReceiveMessageResult"].(map[string]any)
	msgs, _ := result["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("ReceiveMessage: %s", body)
	}
	m := msgs[0].(map[string]any)
	if m["Body"] != "hi \"there\"\r" || !reflect.DeepEqual(m["Attributes"], []any{map[string]any{"Name": "ApproximateReceiveCount", "Value": "1"}}) {
		t.Fatalf("ReceiveMessage: %s", body)
	}

	_, body, doc = get("/000000000000/q", "Action=PurgeQueue", "application/json")
	if resp := doc["PurgeQueueResponse"].(map[string]any); len(resp) != 1 || id(resp) == "" {
		t.Fatalf("PurgeQueue: %s", body)
	}

	status, body, doc = get("/", "Action=GetQueueUrl&QueueName=nope", "application/json")
	e, _ := doc["Error"].(map[string]any)
	if status != 400 || doc["RequestId"] == "" || !reflect.DeepEqual(e, map[string]any{"Code": "AWS.SimpleQueueService.NonExistentQueue",
		"Message": "The specified queue does not exist for this wsdl version.", "Type": "Sender"}) {
		t.Fatalf("GetQueueUrl of a missing queue: %d %s", status, body)
	}
}

// A query request sent to a queue's URL may not name an action that is
// about no one queue: CreateQueue and ListQueues are refused there with
// InvalidAction, as from Amazon SQS, and nothing is created.
func TestQueryRefusesServiceActionsAtAQueueURL(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	for _, form := range []string{"Action=CreateQueue&QueueName=other", "Action=ListQueues"} {
		a := b.query(t, formRequest("/000000000000/q", form))
		action := strings.TrimPrefix(strings.Split(form, "&")[0], "Action=")
		if a.status != 400 || a.Error.Code != "InvalidAction" || a.Error.Message != "The action "+action+" is not valid for this endpoint." {
			t.Errorf("%s at a queue URL: %d %s", action, a.status, a.body)
		}
	}
	if got := b.call(t, "GetQueueUrl", `{"QueueName":"other"}`); got.Type != "QueueDoesNotExist" {
		t.Fatalf("CreateQueue at a queue URL created the queue: %+v", got)
	}
	if a := b.query(t, formRequest("/", "Action=ListQueues")); a.status != 200 {
		t.Fatalf("ListQueues at /: %d %s", a.status, a.body)
	}
}
