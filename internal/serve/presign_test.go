package serve_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// goPresign presigns a GET of target with the AWS SDK for Go's signer,
// at the server's time, for five minutes.
func goPresign(t *testing.T, f *fixture, target, secret string) string {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, target+"&X-Amz-Expires=300", nil)
	if err != nil {
		t.Fatal(err)
	}
	uri, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: testKey, SecretAccessKey: secret},
		r, "UNSIGNED-PAYLOAD", "sqs", "us-east-1", f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return uri
}

// botocorePresign presigns a GET of target with botocore's
// SigV4QueryAuth, in Debian's Python. Without botocore it skips, unless
// LEASEHOLD_TEST_QUERY_CLIENTS is 1, when it fails.
func botocorePresign(t *testing.T, target, secret string) string {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import botocore").Run(); err != nil {
		if os.Getenv("LEASEHOLD_TEST_QUERY_CLIENTS") == "1" {
			t.Fatalf("LEASEHOLD_TEST_QUERY_CLIENTS=1 but Debian's python3-botocore is missing: %v", err)
		}
		t.Skipf("Debian's python3-botocore is missing (%v); set LEASEHOLD_TEST_QUERY_CLIENTS=1 to make this a failure", err)
	}
	const script = `import sys
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
r = AWSRequest(method="GET", url=sys.argv[1])
SigV4QueryAuth(Credentials(sys.argv[2], sys.argv[3]), "sqs", "us-east-1", expires=300).add_auth(r)
print(r.url)
`
	out, err := exec.Command(python, "-c", script, target, testKey, secret).CombinedOutput()
	if err != nil {
		t.Fatalf("botocore presign: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// A server with credentials answers GETs presigned in the query string,
// by the Go SDK and by botocore: ListQueues at the root and
// ReceiveMessage at a queue's URL. A wrong secret is refused, and so is a
// presigned request with a body, which its signature does not cover.
func TestPresignedGET(t *testing.T) {
	for _, presigner := range []struct {
		name    string
		presign func(t *testing.T, f *fixture, target, secret string) string
	}{
		{"go sdk", goPresign},
		{"botocore", func(t *testing.T, _ *fixture, target, secret string) string {
			return botocorePresign(t, target, secret)
		}},
	} {
		t.Run(presigner.name, func(t *testing.T) {
			f := setup(t, backends()[0], options{signed: true})
			created, err := f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String("presigned")})
			if err != nil {
				t.Fatal(err)
			}
			queueURL := *created.QueueUrl
			if _, err := f.c.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: created.QueueUrl, MessageBody: aws.String("hello & welcome")}); err != nil {
				t.Fatal(err)
			}
			status, body := get(t, presigner.presign(t, f, f.url+"/?Action=ListQueues&Version=2012-11-05", testSecret))
			if status != http.StatusOK || !strings.Contains(body, "<QueueUrl>"+queueURL+"</QueueUrl>") {
				t.Fatalf("presigned ListQueues: %d %s", status, body)
			}
			status, body = get(t, presigner.presign(t, f, queueURL+"?Action=ReceiveMessage&Version=2012-11-05&MaxNumberOfMessages=1", testSecret))
			if status != http.StatusOK || !strings.Contains(body, "<Body>hello &amp; welcome</Body>") {
				t.Fatalf("presigned ReceiveMessage: %d %s", status, body)
			}
			status, body = get(t, presigner.presign(t, f, f.url+"/?Action=ListQueues&Version=2012-11-05", "wrong-secret"))
			if status != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
				t.Fatalf("presigned ListQueues with a wrong secret: %d %s", status, body)
			}
			uri := presigner.presign(t, f, queueURL+"?Action=GetQueueAttributes&Version=2012-11-05", testSecret)
			resp, err := http.Post(uri, "application/x-www-form-urlencoded", strings.NewReader("Action=PurgeQueue"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || !strings.Contains(string(b), "presigned") {
				t.Fatalf("presigned POST with a body: %d %s", resp.StatusCode, b)
			}
		})
	}
}

// A GET of a queue's URL without an action is not found, with the XML
// body Amazon SQS gives.
func TestGETQueueURLWithoutAction(t *testing.T) {
	f := setup(t, backends()[0], options{})
	status, body := get(t, f.url+"/000000000000/q")
	if status != http.StatusNotFound || !strings.Contains(body, "<UnknownOperationException") {
		t.Fatalf("GET of a queue URL without an action: %d %s", status, body)
	}
}
