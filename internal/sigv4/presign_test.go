package sigv4_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/leasehold/leasehold/internal/sigv4"
)

// presigned is the URL of a GET presigned by the AWS SDK's signer, for
// expires (none when zero), with the payload hash given.
func presigned(t *testing.T, target, key, secret string, expires time.Duration, payloadHash string) string {
	t.Helper()
	return presignedAs(t, http.MethodGet, target, key, secret, expires, payloadHash)
}

// presignedAs is presigned for a request of the method given.
func presignedAs(t *testing.T, method, target, key, secret string, expires time.Duration, payloadHash string) string {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.Header = http.Header{}
	if expires > 0 {
		q := r.URL.Query()
		q.Set("X-Amz-Expires", strconv.FormatInt(int64(expires/time.Second), 10))
		r.URL.RawQuery = q.Encode()
	}
	uri, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret},
		r, payloadHash, "sqs", "eu-west-1", signedAt)
	if err != nil {
		t.Fatal(err)
	}
	return uri
}

const unsignedPayload = "UNSIGNED-PAYLOAD"

func emptyHash() string {
	sum := sha256.Sum256(nil)
	return hex.EncodeToString(sum[:])
}

// tamper returns uri with the query parameter k set to val.
func tamper(t *testing.T, uri, k, val string) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, val)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestPresigned(t *testing.T) {
	const target = "http://h:1/000000000000/q?Action=ReceiveMessage&MaxNumberOfMessages=10&Version=2012-11-05"
	good := presigned(t, target, "AKID", "secret", time.Hour, unsignedPayload)
	get := func(uri string) *http.Request { return httptest.NewRequest(http.MethodGet, uri, nil) }
	postURL := presignedAs(t, http.MethodPost, target, "AKID", "secret", time.Hour, unsignedPayload)
	withBody := httptest.NewRequest(http.MethodPost, postURL, strings.NewReader("Action=PurgeQueue"))
	withBody.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	chunked := httptest.NewRequest(http.MethodPost, postURL, strings.NewReader("Action=PurgeQueue"))
	chunked.ContentLength = -1
	emptyPost := httptest.NewRequest(http.MethodPost, presignedAs(t, http.MethodPost, "http://h:1/?Action=ListQueues", "AKID", "secret", time.Minute, unsignedPayload), nil)
	for _, tc := range []struct {
		name string
		r    *http.Request
		body string
		now  time.Time
		want string
	}{
		{"good", get(good), "", signedAt, ""},
		{"good, no expiry", get(presigned(t, target, "AKID", "secret", 0, unsignedPayload)), "", signedAt, ""},
		{"good, hash of the empty body", get(presigned(t, target, "AKID", "secret", time.Hour, emptyHash())), "", signedAt, ""},
		{"empty POST", emptyPost, "", signedAt, ""},
		{"near the end of its expiry", get(presigned(t, target, "AKID", "secret", 10*time.Minute, unsignedPayload)), "", signedAt.Add(10*time.Minute - time.Second), ""},
		{"wrong secret", get(presigned(t, target, "AKID", "other", time.Hour, unsignedPayload)), "", signedAt, sigv4.CodeMismatch},
		{"other key", get(presigned(t, target, "OTHER", "secret", time.Hour, unsignedPayload)), "", signedAt, sigv4.CodeUnknownKey},
		{"expired", get(presigned(t, target, "AKID", "secret", 10*time.Minute, unsignedPayload)), "", signedAt.Add(10 * time.Minute), sigv4.CodeExpired},
		{"skewed", get(good), "", signedAt.Add(sigv4.MaxSkew + time.Second), sigv4.CodeExpired},
		{"from the future", get(good), "", signedAt.Add(-sigv4.MaxSkew - time.Second), sigv4.CodeExpired},
		{"expiry over seven days", get(presigned(t, target, "AKID", "secret", 7*24*time.Hour+time.Second, unsignedPayload)), "", signedAt, sigv4.CodeIncomplete},
		{"tampered parameter", get(tamper(t, good, "MaxNumberOfMessages", "1")), "", signedAt, sigv4.CodeMismatch},
		{"added parameter", get(good + "&QueueUrl=x"), "", signedAt, sigv4.CodeMismatch},
		{"tampered expiry", get(tamper(t, good, "X-Amz-Expires", "7200")), "", signedAt, sigv4.CodeMismatch},
		{"other path", get(strings.Replace(good, "/q?", "/r?", 1)), "", signedAt, sigv4.CodeMismatch},
		{"no credential", get(tamper(t, good, "X-Amz-Credential", "")), "", signedAt, sigv4.CodeIncomplete},
		{"repeated signature", get(good + "&X-Amz-Signature=00"), "", signedAt, sigv4.CodeIncomplete},
		{"a semicolon pair outside the signature", get(good + "&QueueUrl=a;b"), "", signedAt, sigv4.CodeIncomplete},
		{"a body", withBody, "Action=PurgeQueue", signedAt, sigv4.CodeIncomplete},
		{"a body of unknown length", chunked, "Action=PurgeQueue", signedAt, sigv4.CodeIncomplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifier(t, tc.now).Verify(tc.r, []byte(tc.body))
			if code(err) != tc.want || (tc.want == "") != (err == nil) {
				t.Fatalf("Verify: %v, want code %q", err, tc.want)
			}
		})
	}
}

func TestPresignedBodyIsRefusedBeforeItIsRead(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, presignedAs(t, http.MethodPost, "http://h:1/?Action=ListQueues", "AKID", "secret", time.Hour, unsignedPayload), strings.NewReader("Action=PurgeQueue"))
	_, err := verifier(t, signedAt).Check(r)
	if code(err) != sigv4.CodeIncomplete || !strings.Contains(err.Error(), "presigned") {
		t.Fatalf("Check of a presigned request with a body: %v, want %s naming the presigned body", err, sigv4.CodeIncomplete)
	}
}

func TestPresignedUnsignedAmzHeaderIsRefused(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, presigned(t, "http://h:1/?Action=ListQueues", "AKID", "secret", time.Hour, unsignedPayload), nil)
	r.Header.Set("X-Amz-Target", "AmazonSQS.PurgeQueue")
	if err := verifier(t, signedAt).Verify(r, nil); code(err) != sigv4.CodeIncomplete {
		t.Fatalf("Verify of a presigned request with an unsigned X-Amz-Target: %v, want %s", err, sigv4.CodeIncomplete)
	}
}

func TestPresignedRegion(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, presigned(t, "http://h:1/?Action=ListQueues", "AKID", "secret", time.Hour, unsignedPayload), nil)
	if got := sigv4.Region(r); got != "eu-west-1" {
		t.Fatalf("Region of a presigned request: %q, want eu-west-1", got)
	}
}
