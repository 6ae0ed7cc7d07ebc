// Package sigv4 checks AWS Signature Version 4 on incoming requests, for
// one key pair. The signature is computed again with the AWS SDK's own
// signer over the headers the client says it signed, and compared in
// constant time; this package only takes the request apart. That signer
// never signs User-Agent, Expect, X-Amzn-Trace-Id or Transfer-Encoding,
// so a request whose client signed one of them is refused, with an error
// that says so; the SDKs of Go, Python, JavaScript and Java 2 sign none of
// them. The headers that choose what a request does (X-Amz-Target,
// Content-Type, every x-amz-* header) must be signed when present (a
// query-protocol request's Content-Type excepted, see mustSign), and a
// request's headers are checked (Check) before its body is read, so that
// an unsigned or wrongly keyed request costs no more than its headers.
package sigv4

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/leasehold/leasehold/clock"
)

// MaxSkew is how far a request's signing time may be from the verifier's
// clock, either way: older signatures are refused, so a captured request
// cannot be replayed later.
const MaxSkew = 15 * time.Minute

const algorithm = "AWS4-HMAC-SHA256"

// Error is a refused request. Code is the AWS error code that names why.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The AWS error codes a refusal carries.
const (
	CodeMissing    = "MissingAuthenticationToken"
	CodeIncomplete = "IncompleteSignature"
	CodeUnknownKey = "InvalidClientTokenId"
	CodeMismatch   = "SignatureDoesNotMatch"
	CodeExpired    = "RequestExpired"
)

func refuse(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Verifier checks requests signed with one key pair.
type Verifier struct {
	accessKey, secret string
	clk               clock.Clock
	signer            *v4.Signer
}

// New returns a verifier of signatures made with the key pair. Clock
// tells the time that signing times are held against; nil means the
// system clock.
func New(accessKeyID, secretAccessKey string, clk clock.Clock) (*Verifier, error) {
	if accessKeyID == "" || secretAccessKey == "" {
		return nil, errors.New("sigv4: the access key id and the secret access key must both be set")
	}
	return &Verifier{accessKey: accessKeyID, secret: secretAccessKey, clk: clock.OrSystem(clk), signer: v4.NewSigner()}, nil
}

// authorization is the parsed Authorization header.
type authorization struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

func parseAuthorization(h string) (authorization, error) {
	var a authorization
	rest, ok := strings.CutPrefix(h, algorithm+" ")
	if !ok {
		return a, refuse(CodeIncomplete, "the Authorization header does not start with %s", algorithm)
	}
	var credential, signed string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			a.signature = v
		}
	}
	if credential == "" || signed == "" || a.signature == "" {
		return a, refuse(CodeIncomplete, "the Authorization header needs Credential, SignedHeaders and Signature")
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return a, refuse(CodeIncomplete, "the credential %q is not KEY/DATE/REGION/SERVICE/aws4_request", credential)
	}
	a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	a.signedHeaders = strings.Split(signed, ";")
	return a, nil
}

// Signed is a request whose Authorization header passed Check: its form,
// key id, signing time and signed headers are acceptable, and only the
// signature over its body is left to check.
type Signed struct {
	v        *Verifier
	r        *http.Request
	auth     authorization
	signedAt time.Time
}

// mustSign reports whether a header, by its lower-case name, must be
// signed when the request carries it: the action (X-Amz-Target), the body's
// type, and every x-amz-* header. A header that chooses what the request
// does and is not signed could be changed by whoever captured the request:
// a captured SendMessage replayed as PurgeQueue. The ids that proxies in
// front add on the way (CloudFront's X-Amz-Cf-Id) choose nothing, and
// need not be. Nor need the Content-Type of a request without
// X-Amz-Target (the query protocol, whose action and input are in the
// signed URL and body): some clients (kombu's SQS transport before
// 5.3.4) set it after signing, as Amazon accepts, and no Content-Type
// makes a signed form do anything else: the server reads the body as a
// form or refuses it.
func mustSign(name string, query bool) bool {
	if name == "x-amz-cf-id" {
		return false
	}
	return name == "content-type" && !query || strings.HasPrefix(name, "x-amz-")
}

// Check checks what r's headers alone say, before its body is read: that
// it carries an Authorization header of this package's algorithm, made
// with the verifier's key id, signed within MaxSkew of now, over host,
// X-Amz-Target, Content-Type and every x-amz-* header it carries. It
// returns the request to finish with Signed.Verify, or an *Error.
func (v *Verifier) Check(r *http.Request) (*Signed, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, refuse(CodeMissing, "the request is not signed: it needs an AWS Signature Version 4 Authorization header")
	}
	a, err := parseAuthorization(h)
	if err != nil {
		return nil, err
	}
	stamp := r.Header.Get("X-Amz-Date")
	if stamp == "" {
		return nil, refuse(CodeIncomplete, "the request has no X-Amz-Date header")
	}
	signedAt, err := time.Parse("20060102T150405Z", stamp)
	if err != nil {
		return nil, refuse(CodeIncomplete, "X-Amz-Date %q is not a time like 20060102T150405Z", stamp)
	}
	if !strings.HasPrefix(stamp, a.date) {
		return nil, refuse(CodeMismatch, "the credential's date %s is not the date of X-Amz-Date %s", a.date, stamp)
	}
	if subtle.ConstantTimeCompare([]byte(a.accessKey), []byte(v.accessKey)) != 1 {
		return nil, refuse(CodeUnknownKey, "the access key id %q is not known here", a.accessKey)
	}
	now := v.clk.Now()
	if skew := now.Sub(signedAt); skew > MaxSkew || skew < -MaxSkew {
		return nil, refuse(CodeExpired, "the signature was made at %s, more than %s from the server's time %s", stamp, MaxSkew, now.UTC().Format("20060102T150405Z"))
	}
	if !slices.Contains(a.signedHeaders, "host") {
		return nil, refuse(CodeIncomplete, "the signed headers must include host")
	}
	query := r.Header.Get("X-Amz-Target") == ""
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		lower := strings.ToLower(name)
		if mustSign(lower, query) && !slices.Contains(a.signedHeaders, lower) {
			return nil, refuse(CodeIncomplete, "the header %s is not signed: X-Amz-Target, Content-Type (with X-Amz-Target) and every x-amz-* header must be, when the request carries them", name)
		}
	}
	return &Signed{v: v, r: r, auth: a, signedAt: signedAt}, nil
}

// Verify checks the request's signature over body, which is its whole
// body (the request's Body is not read). It returns nil or an *Error.
func (s *Signed) Verify(body []byte) error {
	r, a, v := s.r, s.auth, s.v
	// Sign a copy of the request that holds exactly the headers the client
	// signed, with the same scope and time, and compare.
	// No scheme: the signer then keeps the Host header whole, port and
	// all, as the client sent and signed it.
	u := *r.URL
	u.Scheme, u.Host = "", r.Host
	c := &http.Request{Method: r.Method, URL: &u, Host: r.Host, Header: http.Header{}}
	for _, name := range a.signedHeaders {
		switch name {
		case "host":
		case "content-length":
			c.ContentLength = int64(len(body))
		default:
			vals := r.Header.Values(name)
			if len(vals) == 0 {
				return refuse(CodeIncomplete, "the signed header %q is not in the request", name)
			}
			c.Header[http.CanonicalHeaderKey(name)] = vals
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: v.accessKey, SecretAccessKey: v.secret}
	if err := v.signer.SignHTTP(context.Background(), creds, c, hex.EncodeToString(sum[:]), a.service, a.region, s.signedAt); err != nil {
		return refuse(CodeIncomplete, "the request cannot be signed again: %v", err)
	}
	want, err := parseAuthorization(c.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	if strings.Join(want.signedHeaders, ";") != strings.Join(a.signedHeaders, ";") {
		return refuse(CodeMismatch, "the signed headers %s are not the ones this server can check (%s): it cannot check a signature over user-agent, expect, x-amzn-trace-id, transfer-encoding or an empty content-length",
			strings.Join(a.signedHeaders, ";"), strings.Join(want.signedHeaders, ";"))
	}
	if !hmac.Equal([]byte(want.signature), []byte(a.signature)) {
		return refuse(CodeMismatch, "the request signature we calculated does not match the signature you provided; check your secret access key and signing method")
	}
	return nil
}

// AccessKeyID is the access key id that requests must be signed with.
func (v *Verifier) AccessKeyID() string { return v.accessKey }

// Verify checks r's headers (Check) and its signature over body, which
// is r's whole body (r.Body is not read). It returns nil or an *Error.
func (v *Verifier) Verify(r *http.Request, body []byte) error {
	s, err := v.Check(r)
	if err != nil {
		return err
	}
	return s.Verify(body)
}

// Region returns the region named in r's credential scope, or "" when r
// carries none.
func Region(r *http.Request) string {
	a, err := parseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return ""
	}
	return a.region
}
