package sigv4_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/sigv4"
)

var signedAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// signed is a request as a server receives it, signed by the AWS SDK's
// signer as a client would.
func signed(t *testing.T, host, body, secret, token string, extra map[string]string) *http.Request {
	t.Helper()
	out := httptest.NewRequest(http.MethodPost, "http://"+host+"/", strings.NewReader(body))
	out.Header.Set("Content-Type", "application/x-amz-json-1.0")
	out.Header.Set("X-Amz-Target", "AmazonSQS.ListQueues")
	for k, v := range extra {
		out.Header.Set(k, v)
	}
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: secret, SessionToken: token},
		out, hex.EncodeToString(sum[:]), "sqs", "eu-west-1", signedAt); err != nil {
		t.Fatal(err)
	}
	return out
}

func verifier(t *testing.T, now time.Time) *sigv4.Verifier {
	t.Helper()
	clk := clocktest.New()
	if err := clk.SetWall(now); err != nil {
		t.Fatal(err)
	}
	v, err := sigv4.New("AKID", "secret", clk)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func code(err error) string {
	var e *sigv4.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestVerify(t *testing.T) {
	v := verifier(t, signedAt.Add(time.Minute))
	body := `{"QueueNamePrefix":"a"}`
	for _, host := range []string{"127.0.0.1:9324", "sqs.example:80", "sqs.example"} {
		if err := v.Verify(signed(t, host, body, "secret", "", nil), []byte(body)); err != nil {
			t.Errorf("a good signature for host %s: %v", host, err)
		}
	}
	if err := v.Verify(signed(t, "h:1", body, "secret", "session-token", nil), []byte(body)); err != nil {
		t.Errorf("a good signature with a session token: %v", err)
	}
	for _, tc := range []struct {
		what string
		r    *http.Request
		body string
		want string
	}{
		{"another secret", signed(t, "h:1", body, "other", "", nil), body, sigv4.CodeMismatch},
		{"a changed body", signed(t, "h:1", body, "secret", "", nil), `{"QueueNamePrefix":"b"}`, sigv4.CodeMismatch},
		{"no signature", httptest.NewRequest(http.MethodPost, "http://h:1/", nil), body, sigv4.CodeMissing},
	} {
		if err := v.Verify(tc.r, []byte(tc.body)); code(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.what, err, tc.want)
		}
	}
	changed := signed(t, "h:1", body, "secret", "", nil)
	changed.Header.Set("X-Amz-Target", "AmazonSQS.DeleteQueue")
	if err := v.Verify(changed, []byte(body)); code(err) != sigv4.CodeMismatch {
		t.Errorf("a changed signed header: %v", err)
	}
	other := signed(t, "h:1", body, "secret", "", nil)
	other.Header.Set("Authorization", strings.Replace(other.Header.Get("Authorization"), "Credential=AKID/", "Credential=NOPE/", 1))
	if err := v.Verify(other, []byte(body)); code(err) != sigv4.CodeUnknownKey {
		t.Errorf("another key: %v", err)
	}
	for _, skew := range []time.Duration{16 * time.Minute, -16 * time.Minute} {
		if err := verifier(t, signedAt.Add(skew)).Verify(signed(t, "h:1", body, "secret", "", nil), []byte(body)); code(err) != sigv4.CodeExpired {
			t.Errorf("a signature %s away: %v, want %s", skew, err, sigv4.CodeExpired)
		}
	}
}

// A client that signs User-Agent is refused with an error that says why:
// the SDK's signer cannot check such a signature.
func TestSignedUserAgentIsRefusedAndNamed(t *testing.T) {
	v := verifier(t, signedAt)
	body := "{}"
	r := signed(t, "h:1", body, "secret", "", nil)
	auth := r.Header.Get("Authorization")
	r.Header.Set("Authorization", strings.Replace(auth, "SignedHeaders=", "SignedHeaders=user-agent;", 1))
	r.Header.Set("User-Agent", "old-sdk")
	err := v.Verify(r, []byte(body))
	if code(err) != sigv4.CodeMismatch || !strings.Contains(err.Error(), "user-agent") {
		t.Fatalf("a signature over user-agent: %v", err)
	}
}

// signedWithout is a good signature over a request that did not carry the
// header name when it was signed, to which name is added afterwards, as
// whoever captured the request could.
func signedWithout(t *testing.T, body, name, value string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://h:1/", strings.NewReader(body))
	for _, h := range []string{"Content-Type", "X-Amz-Target"} {
		if h != name {
			r.Header.Set(h, map[string]string{"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"}[h])
		}
	}
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"},
		r, hex.EncodeToString(sum[:]), "sqs", "eu-west-1", signedAt); err != nil {
		t.Fatal(err)
	}
	r.Header.Set(name, value)
	return r
}

// The headers that choose what a request does must be signed: a captured
// request whose unsigned X-Amz-Target is changed to PurgeQueue is
// refused, by Check alone, before any body is read, with the header named.
func TestUnsignedActionHeadersAreRefused(t *testing.T) {
	v := verifier(t, signedAt)
	body := `{"QueueUrl":"/q"}`
	for _, tc := range []struct{ name, value string }{
		{"X-Amz-Target", "AmazonSQS.PurgeQueue"},
		{"Content-Type", "application/x-amz-json-1.0"},
		{"X-Amz-Security-Token", "stolen"},
		{"X-Amz-Anything", "1"},
	} {
		r := signedWithout(t, body, tc.name, tc.value)
		_, err := v.Check(r)
		if code(err) != sigv4.CodeIncomplete || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s added after signing: Check says %v; want %s naming the header", tc.name, err, sigv4.CodeIncomplete)
		}
		if err := v.Verify(r, []byte(body)); err == nil {
			t.Errorf("%s added after signing: Verify accepts it", tc.name)
		}
	}
	// Headers outside the rule may stay unsigned: ids that proxies add.
	for _, h := range []string{"X-Amzn-Trace-Id", "X-Amz-Cf-Id"} {
		r := signedWithout(t, body, h, "Root=1")
		if err := v.Verify(r, []byte(body)); err != nil {
			t.Errorf("an unsigned %s: %v", h, err)
		}
	}
}

// Check refuses what the headers alone condemn, and passes a good
// request on to the check of its body's signature.
func TestCheckThenVerify(t *testing.T) {
	v := verifier(t, signedAt)
	body := `{"QueueNamePrefix":"a"}`
	s, err := v.Check(signed(t, "h:1", body, "secret", "", nil))
	if err != nil {
		t.Fatalf("Check of a good request: %v", err)
	}
	if err := s.Verify([]byte(body)); err != nil {
		t.Errorf("Verify of a good body: %v", err)
	}
	if err := s.Verify([]byte(`{}`)); code(err) != sigv4.CodeMismatch {
		t.Errorf("Verify of another body: %v, want %s", err, sigv4.CodeMismatch)
	}
	other := signed(t, "h:1", body, "secret", "", nil)
	other.Header.Set("Authorization", strings.Replace(other.Header.Get("Authorization"), "Credential=AKID/", "Credential=NOPE/", 1))
	if _, err := v.Check(other); code(err) != sigv4.CodeUnknownKey {
		t.Errorf("Check of another key id: %v, want %s", err, sigv4.CodeUnknownKey)
	}
	if _, err := v.Check(httptest.NewRequest(http.MethodPost, "http://h:1/", nil)); code(err) != sigv4.CodeMissing {
		t.Errorf("Check of an unsigned request: %v, want %s", err, sigv4.CodeMissing)
	}
}

// A request without X-Amz-Target (the query protocol, whose action is
// in its signed form) may leave its Content-Type unsigned, as clients
// that set it after signing do; with X-Amz-Target it must be signed.
func TestQueryRequestsMayLeaveContentTypeUnsigned(t *testing.T) {
	v := verifier(t, signedAt)
	body := "Action=ListQueues&Version=2012-11-05"
	r := httptest.NewRequest(http.MethodPost, "http://h:1/", strings.NewReader(body))
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"},
		r, hex.EncodeToString(sum[:]), "sqs", "eu-west-1", signedAt); err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	if err := v.Verify(r, []byte(body)); err != nil {
		t.Fatalf("a query request with an unsigned Content-Type: %v", err)
	}
	r.Header.Set("X-Amz-Target", "AmazonSQS.PurgeQueue")
	if err := v.Verify(r, []byte(body)); code(err) != sigv4.CodeIncomplete {
		t.Fatalf("the same with an unsigned X-Amz-Target: %v, want %s", err, sigv4.CodeIncomplete)
	}
}
