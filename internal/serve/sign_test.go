package serve_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The AWS SDK for Go signs every header the server requires signed
// (X-Amz-Target, Content-Type, each x-amz-* header), so that its
// requests, of every kind, pass; and the server's answers reach it whole.
func TestGoSDKSignsWhatTheServerRequires(t *testing.T) {
	f := setup(t, backends()[0], options{signed: true})
	var mu sync.Mutex
	var unsigned []string
	var seen int
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		_, list, _ := strings.Cut(auth, "SignedHeaders=")
		list, _, _ = strings.Cut(list, ",")
		signed := strings.Split(list, ";")
		mu.Lock()
		seen++
		for name := range r.Header {
			lower := strings.ToLower(name)
			if (lower == "content-type" || strings.HasPrefix(lower, "x-amz-")) && !slices.Contains(signed, lower) {
				unsigned = append(unsigned, lower)
			}
		}
		mu.Unlock()
		f.srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(capture.Close)
	f.url = capture.URL
	c := f.client(testKey, testSecret)
	created, err := c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String("sdk")})
	if err != nil {
		t.Fatal(err)
	}
	url := created.QueueUrl
	if _, err := c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("<b>&</b> 😀"),
		MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number"), StringValue: aws.String("-1.5e3")}}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MessageAttributeNames: []string{"All"}})
	if err != nil || len(got.Messages) != 1 || *got.Messages[0].Body != "<b>&</b> 😀" {
		t.Fatalf("received %+v, %v", got, err)
	}
	if _, err := c.PurgeQueue(f.ctx, &sqs.PurgeQueueInput{QueueUrl: url}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen < 4 || len(unsigned) > 0 {
		t.Fatalf("%d requests; headers the SDK left unsigned: %v", seen, unsigned)
	}
}
