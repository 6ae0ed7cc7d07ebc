// Package sigv4 checks AWS Signature Version 4 on incoming requests, for
// one key pair, signed in the Authorization header or presigned in the
// query string (a presigned signature does not cover a body, so a
// presigned request must have none). The signature is computed again with the AWS SDK's own
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
	"net/url"
	"slices"
	"strconv"
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
	// expires is how long after signing a presigned request is good
	// for, by its X-Amz-Expires; zero when it has none.
	expires time.Duration
}

// setCredential sets a's scope from a credential, KEY/DATE/REGION/SERVICE/aws4_request.
func (a *authorization) setCredential(credential string) error {
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return refuse(CodeIncomplete, "the credential %q is not KEY/DATE/REGION/SERVICE/aws4_request", credential)
	}
	a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	return nil
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
	if err := a.setCredential(credential); err != nil {
		return a, err
	}
	a.signedHeaders = strings.Split(signed, ";")
	return a, nil
}

// Signed is a request whose signature passed Check: its form,
// key id, signing time and signed headers are acceptable, and only the
// signature over its body is left to check.
type Signed struct {
	v        *Verifier
	r        *http.Request
	auth     authorization
	signedAt time.Time
	// unsignedQuery is a presigned request's query without its
	// signature; nil for a request signed in its Authorization header.
	unsignedQuery url.Values
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

// Check checks what r's headers and URL alone say, before its body is
// read: that it is signed with this package's algorithm, in an
// Authorization header or, when it has none, in its query string
// (presigned), made with the verifier's key id, signed within MaxSkew of
// now (and, presigned, not past its X-Amz-Expires), over host,
// X-Amz-Target, Content-Type and every x-amz-* header it carries. A
// presigned signature does not cover the body, so a presigned request
// must have none. It returns the request to finish with Signed.Verify,
// or an *Error.
func (v *Verifier) Check(r *http.Request) (*Signed, error) {
	// The signer reads the query as net/http parses it, which skips a
	// malformed pair (one with a semicolon, say) that the API's own form
	// parser would read: such a pair would be outside the signature.
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, refuse(CodeIncomplete, "the query string is malformed: %v", err)
	}
	var a authorization
	var stamp string
	h := r.Header.Get("Authorization")
	presigned := h == "" && query.Has("X-Amz-Signature")
	switch {
	case presigned:
		if a, stamp, err = parsePresigned(query); err != nil {
			return nil, err
		}
		if r.ContentLength > 0 {
			return nil, errPresignedBody
		}
	case h == "":
		return nil, refuse(CodeMissing, "the request is not signed: it needs an AWS Signature Version 4 Authorization header, or a presigned URL (X-Amz-Signature and the other X-Amz-* query parameters)")
	default:
		if a, err = parseAuthorization(h); err != nil {
			return nil, err
		}
		if stamp = r.Header.Get("X-Amz-Date"); stamp == "" {
			return nil, refuse(CodeIncomplete, "the request has no X-Amz-Date header")
		}
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
	if presigned && a.expires > 0 && !now.Before(signedAt.Add(a.expires)) {
		return nil, refuse(CodeExpired, "the presigned request expired at %s (X-Amz-Date %s plus X-Amz-Expires %d seconds); the server's time is %s",
			signedAt.Add(a.expires).Format("20060102T150405Z"), stamp, int64(a.expires/time.Second), now.UTC().Format("20060102T150405Z"))
	}
	if !slices.Contains(a.signedHeaders, "host") {
		return nil, refuse(CodeIncomplete, "the signed headers must include host")
	}
	isQuery := r.Header.Get("X-Amz-Target") == ""
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		lower := strings.ToLower(name)
		if mustSign(lower, isQuery) && !slices.Contains(a.signedHeaders, lower) {
			return nil, refuse(CodeIncomplete, "the header %s is not signed: X-Amz-Target, Content-Type (with X-Amz-Target) and every x-amz-* header must be, when the request carries them", name)
		}
	}
	s := &Signed{v: v, r: r, auth: a, signedAt: signedAt}
	if presigned {
		query.Del("X-Amz-Signature")
		s.unsignedQuery = query
	}
	return s, nil
}

// errPresignedBody refuses a presigned request with a body, which its
// signature does not cover.
var errPresignedBody = refuse(CodeIncomplete, "a presigned request's signature does not cover a body: send the whole input in the URL (a GET, or a POST without a body), or sign with an Authorization header")

// maxExpires is the longest X-Amz-Expires that AWS accepts: seven days.
const maxExpires = 7 * 24 * time.Hour

// parsePresigned reads the signature's parts from a presigned request's
// query, and the signing time's stamp.
func parsePresigned(q url.Values) (authorization, string, error) {
	var a authorization
	params := map[string]string{}
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		vals := q[k]
		if len(vals) != 1 || vals[0] == "" {
			return a, "", refuse(CodeIncomplete, "a presigned request needs exactly one each of X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-SignedHeaders and X-Amz-Signature in its query; %s is missing, empty or repeated", k)
		}
		params[k] = vals[0]
	}
	if params["X-Amz-Algorithm"] != algorithm {
		return a, "", refuse(CodeIncomplete, "X-Amz-Algorithm is %q, not %s", params["X-Amz-Algorithm"], algorithm)
	}
	if err := a.setCredential(params["X-Amz-Credential"]); err != nil {
		return a, "", err
	}
	a.signedHeaders = strings.Split(params["X-Amz-SignedHeaders"], ";")
	a.signature = params["X-Amz-Signature"]
	if vals, ok := q["X-Amz-Expires"]; ok {
		n, err := strconv.ParseInt(strings.Join(vals, ","), 10, 64)
		if err != nil || n < 1 || time.Duration(n)*time.Second > maxExpires {
			return a, "", refuse(CodeIncomplete, "X-Amz-Expires %q is not a whole number of seconds from 1 to %d (seven days)", strings.Join(vals, ","), int64(maxExpires/time.Second))
		}
		a.expires = time.Duration(n) * time.Second
	}
	return a, params["X-Amz-Date"], nil
}

// Verify checks the request's signature over body, which is its whole
// body (the request's Body is not read). It returns nil or an *Error.
func (s *Signed) Verify(body []byte) error {
	r, a, v := s.r, s.auth, s.v
	if s.unsignedQuery != nil && len(body) > 0 {
		return errPresignedBody
	}
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
	var want authorization
	if s.unsignedQuery != nil {
		// The Go SDK presigns with the payload hash UNSIGNED-PAYLOAD when
		// asked to; botocore's SigV4QueryAuth with the hash of the empty
		// body. Either may sign a request whose body is empty.
		u.RawQuery = s.unsignedQuery.Encode()
		var err error
		for _, hash := range []string{hex.EncodeToString(sum[:]), unsignedPayload} {
			if want, err = v.presign(c, hash, a, s.signedAt); err != nil || hmac.Equal([]byte(want.signature), []byte(a.signature)) {
				break
			}
		}
		if err != nil {
			return err
		}
	} else {
		if err := v.signer.SignHTTP(context.Background(), creds, c, hex.EncodeToString(sum[:]), a.service, a.region, s.signedAt); err != nil {
			return refuse(CodeIncomplete, "the request cannot be signed again: %v", err)
		}
		var err error
		if want, err = parseAuthorization(c.Header.Get("Authorization")); err != nil {
			return err
		}
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

// unsignedPayload is the payload hash of a signature that leaves the
// body out.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// presign signs c in its query with the payload hash, as a presigned
// request of scope a made at signedAt, and returns what the signed query
// says. Headers are not hoisted into the query: a header the client
// signed as a header is checked as one, and one the client hoisted is
// already in the query.
func (v *Verifier) presign(c *http.Request, payloadHash string, a authorization, signedAt time.Time) (authorization, error) {
	creds := aws.Credentials{AccessKeyID: v.accessKey, SecretAccessKey: v.secret}
	uri, _, err := v.signer.PresignHTTP(context.Background(), creds, c, payloadHash, a.service, a.region, signedAt,
		func(o *v4.SignerOptions) { o.DisableHeaderHoisting = true })
	if err != nil {
		return authorization{}, refuse(CodeIncomplete, "the request cannot be signed again: %v", err)
	}
	signedURL, err := url.Parse(uri)
	if err != nil {
		return authorization{}, refuse(CodeIncomplete, "the request cannot be signed again: %v", err)
	}
	q := signedURL.Query()
	return authorization{signedHeaders: strings.Split(q.Get("X-Amz-SignedHeaders"), ";"), signature: q.Get("X-Amz-Signature")}, nil
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
	var a authorization
	if h := r.Header.Get("Authorization"); h != "" {
		a, _ = parseAuthorization(h)
	} else if q := r.URL.Query(); q.Has("X-Amz-Signature") {
		_ = a.setCredential(q.Get("X-Amz-Credential"))
	}
	return a.region
}
