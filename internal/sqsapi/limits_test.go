package sqsapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/authlimit"
	"github.com/leasehold/leasehold/internal/sigv4"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// logLines is a log handler that keeps its records.
type logLines struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.recs {
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		b.WriteString("\n")
	}
	return b.String()
}

type bundle struct {
	api *API
	clk *clocktest.Clock
	log *logLines
}

// setup is an API over a memory store on a fake clock; edit adjusts its
// config.
func setup(t testing.TB, edit func(*Config)) bundle {
	t.Helper()
	clk := clocktest.New()
	st, err := memory.New(memory.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := &logLines{}
	cfg := Config{Store: st, ReceiptKey: make([]byte, MinReceiptKey), MessageIDs: testIDs(t), Clock: clk, Logger: slog.New(log)}
	if edit != nil {
		edit(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.Drain()
	return bundle{a, clk, log}
}

type answer struct {
	status int
	header http.Header
	Type   string `json:"__type"`
	Msg    string `json:"message"`
	body   []byte
}

func (b bundle) do(t *testing.T, r *http.Request) answer {
	t.Helper()
	w := httptest.NewRecorder()
	b.api.ServeHTTP(w, r)
	out := answer{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
	_ = json.Unmarshal(out.body, &out)
	out.Type = strings.TrimPrefix(out.Type, "com.amazonaws.sqs#")
	return out
}

func request(action, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://h:1/", strings.NewReader(body))
	r.Header.Set("X-Amz-Target", targetPrefix+action)
	r.Header.Set("Content-Type", contentType)
	return r
}

func (b bundle) call(t *testing.T, action, body string) answer {
	t.Helper()
	return b.do(t, request(action, body))
}

func TestValidNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-1": true, "+1": true, "1.5": true, ".5": true, "5.": true, "1e3": true, "-1.5E-3": true, "0.000": true,
		"12345678901234567890123456789012345678": true, "1234567890123456789012345678901234567800000": true,
		"123456789012345678901234567890123456789": false,
		"1e126": true, "1.1e126": false, "9e125": true, "1e127": false, "1e-128": true, "9e-129": false, "0e999": true,
		"": false, "-": false, ".": false, "NaN": false, "Inf": false, "Infinity": false, "0x1p3": false, "1_000": false,
		" 1": false, "1 ": false, "1e": false, "1e+": false, "--1": false, "1.2.3": false, "1e1000000000": false,
	} {
		if got := validNumber(s); got != want {
			t.Errorf("validNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

// Text that is not Unicode is refused with SQS's errors, not turned into
// U+FFFD; and the characters SQS forbids are refused too.
func TestSendRefusesWhatIsNotText(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	for _, tc := range []struct{ body, want string }{
		{"{\"QueueUrl\":\"/q\",\"MessageBody\":\"bad\xffutf8\"}", "InvalidMessageContents"},
		{`{"QueueUrl":"/q","MessageBody":"lone \ud800 high"}`, "InvalidMessageContents"},
		{`{"QueueUrl":"/q","MessageBody":"lone \udc00 low"}`, "InvalidMessageContents"},
		{`{"QueueUrl":"/q","messagebody":"\ud800"}`, "InvalidMessageContents"},
		{`{"QueueUrl":"/q","MessageBody":"nul \u0000"}`, "InvalidMessageContents"},
		{`{"QueueUrl":"/q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"String","StringValue":"\udfff"}}}`, "InvalidParameterValueException"},
		{"{\"QueueUrl\":\"/q\",\"MessageBody\":\"x\",\"MessageAttributes\":{\"a\":{\"DataType\":\"String\",\"StringValue\":\"\xc3\"}}}", "InvalidParameterValueException"},
		{`{"QueueUrl":"/q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"String","StringValue":"\u0001"}}}`, "InvalidParameterValueException"},
		{`{"QueueUrl":"/q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"Number","StringValue":"NaN"}}}`, "InvalidParameterValueException"},
		{`{"QueueUrl":"/q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"Number","StringValue":"1e127"}}}`, "InvalidParameterValueException"},
	} {
		if got := b.call(t, "SendMessage", tc.body); got.status != 400 || got.Type != tc.want {
			t.Errorf("%q: %d %s %s; want 400 %s", tc.body, got.status, got.Type, got.Msg, tc.want)
		}
	}
	for _, ok := range []string{`{"QueueUrl":"/q","MessageBody":"pair \ud83d\ude00 and \ufffd"}`,
		`{"QueueUrl":"/q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"Number","StringValue":"-1.5e3"}}}`} {
		if got := b.call(t, "SendMessage", ok); got.status != 200 {
			t.Errorf("%s: %d %s %s; want it sent", ok, got.status, got.Type, got.Msg)
		}
	}
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A request with far more attributes or entries than SQS takes is
// refused as the scan reaches the limit, without decoding them all: it
// costs little more than its body.
func TestOverLimitContainersStopTheDecoding(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	var attrs, entries bytes.Buffer
	for i := 0; attrs.Len() < 8<<20; i++ {
		fmt.Fprintf(&attrs, `%s"a%d":{"DataType":"String","StringValue":"v"}`, map[bool]string{true: "", false: ","}[i == 0], i)
	}
	for i := 0; entries.Len() < 8<<20; i++ {
		fmt.Fprintf(&entries, `%s{"Id":"e%d","MessageBody":"b"}`, map[bool]string{true: "", false: ","}[i == 0], i)
	}
	for _, tc := range []struct{ action, body, want string }{
		{"SendMessage", `{"QueueUrl":"/q","MessageBody":"x","MessageAttributes":{` + attrs.String() + `}}`, "InvalidParameterValueException"},
		{"SendMessageBatch", `{"QueueUrl":"/q","Entries":[` + entries.String() + `]}`, "TooManyEntriesInBatchRequest"},
		// The decoder takes "Entrieſ" (a long s) for Entries: so does the scan.
		{"SendMessageBatch", `{"QueueUrl":"/q","Entrieſ":[` + entries.String() + `]}`, "TooManyEntriesInBatchRequest"},
		{"ListQueueTags", `{"QueueUrl":"/q","Tags":{` + attrs.String() + `}}`, "InvalidParameterValueException"},
	} {
		var got answer
		cost := allocated(func() { got = b.call(t, tc.action, tc.body) })
		if got.Type != tc.want {
			t.Errorf("%s of %d bytes: %d %s %s; want %s", tc.action, len(tc.body), got.status, got.Type, got.Msg, tc.want)
		}
		// The body is read once (and built once by the test's request);
		// decoding the attributes cost ten times the body.
		if limit := uint64(3*len(tc.body) + 4<<20); cost > limit {
			t.Errorf("%s of %d bytes allocated %d bytes; want at most %d", tc.action, len(tc.body), cost, limit)
		}
	}
	for _, body := range []string{
		`{"QueueUrl":"/q","Entries":[` + strings.Repeat(`{"Id":"a","MessageBody":"b"},`, 10) + `{"Id":"k","MessageBody":"b"}]}`,
	} {
		if got := b.call(t, "SendMessageBatch", body); got.Type != "TooManyEntriesInBatchRequest" {
			t.Errorf("11 entries: %s %s", got.Type, got.Msg)
		}
	}
	if got := b.call(t, "SendMessage", `{"QueueUrl":"/q","MessageBody":"x","a":`+strings.Repeat("[", 20)+strings.Repeat("]", 20)+`}`); got.Type != "InvalidParameterValueException" {
		t.Errorf("20 levels deep: %s %s", got.Type, got.Msg)
	}
}

// A body longer than the largest valid request is refused by its
// Content-Length alone, unread, and the connection closed.
func TestBodyOverTheLargestRequestIsNotRead(t *testing.T) {
	b := setup(t, nil)
	body := &countingReader{}
	r := httptest.NewRequest(http.MethodPost, "http://h:1/", body)
	r.ContentLength = maxRequestBody + 1
	r.Header.Set("X-Amz-Target", targetPrefix+"SendMessageBatch")
	got := b.do(t, r)
	if got.Type != "BatchRequestTooLong" || body.n != 0 || got.header.Get("Connection") != "close" {
		t.Fatalf("a %d-byte batch: %s %s, %d bytes read, Connection %q", r.ContentLength, got.Type, got.Msg, body.n, got.header.Get("Connection"))
	}
}

// countingReader counts what is read of an endless body.
type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) {
	c.n += len(p)
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

const (
	testKey    = "AKID"
	testSecret = "secret"
)

func signedRequest(t *testing.T, clk *clocktest.Clock, action, body, secret string) *http.Request {
	t.Helper()
	r := request(action, body)
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testKey, SecretAccessKey: secret},
		r, hex.EncodeToString(sum[:]), "sqs", "us-east-1", clk.Now()); err != nil {
		t.Fatal(err)
	}
	return r
}

func signedSetup(t *testing.T) bundle {
	t.Helper()
	return setup(t, func(c *Config) {
		v, err := sigv4.New(testKey, testSecret, c.Clock)
		if err != nil {
			t.Fatal(err)
		}
		c.Verifier = v
	})
}

// An unsigned or wrongly keyed request is refused before a byte of its
// body is read, and its connection is closed, so that the body is never
// drained either.
func TestUnauthenticatedBodiesAreNotRead(t *testing.T) {
	b := signedSetup(t)
	for what, edit := range map[string]func(*http.Request){
		"unsigned": func(r *http.Request) { r.Header.Del("Authorization") },
		"another key": func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), testKey+"/", "NOPE/", 1))
		},
		"unsigned act": func(r *http.Request) { r.Header.Set("X-Amz-Target", targetPrefix+"PurgeQueue") },
	} {
		r := signedRequest(t, b.clk, "SendMessage", "", testSecret)
		edit(r)
		body := &countingReader{}
		r.Body, r.ContentLength = io.NopCloser(body), 20<<20
		if what == "unsigned act" {
			// The action header signed under another name: the signature
			// lists x-amz-target, so it is checked with the body, not
			// before; refused all the same.
			r.ContentLength = 0
			r.Body = http.NoBody
		}
		got := b.do(t, r)
		if got.status != 403 || body.n != 0 {
			t.Errorf("%s: %d %s, %d body bytes read; want 403 and none", what, got.status, got.Type, body.n)
		}
		if what != "unsigned act" && got.header.Get("Connection") != "close" {
			t.Errorf("%s: Connection %q, want close", what, got.header.Get("Connection"))
		}
	}
}

// An address that keeps failing to authenticate is throttled before any
// check, and logged at most once a second; it may try again as its
// budget refills, and others are not held back.
func TestFailedAuthenticationIsSlowedPerAddress(t *testing.T) {
	b := signedSetup(t)
	guess := func(addr string) answer {
		r := signedRequest(t, b.clk, "ListQueues", "{}", "guess")
		r.RemoteAddr = addr
		return b.do(t, r)
	}
	const attacker = "203.0.113.7:4000"
	for i := range authlimit.Burst {
		if got := guess(attacker); got.Type != sigv4.CodeMismatch {
			t.Fatalf("guess %d: %s, want %s", i, got.Type, sigv4.CodeMismatch)
		}
	}
	for range 1000 {
		if got := guess(attacker); got.Type != "RequestThrottled" || got.header.Get("Retry-After") == "" {
			t.Fatalf("a guess past the budget: %d %s, Retry-After %q", got.status, got.Type, got.header.Get("Retry-After"))
		}
	}
	good := signedRequest(t, b.clk, "ListQueues", "{}", testSecret)
	good.RemoteAddr = "198.51.100.1:5000"
	if got := b.do(t, good); got.status != 200 {
		t.Errorf("another address, signed well: %d %s %s", got.status, got.Type, got.Msg)
	}
	b.clk.Advance(authlimit.Refill)
	if got := guess(attacker); got.Type != sigv4.CodeMismatch {
		t.Errorf("after one refill: %s, want one more try", got.Type)
	}
	if got := guess(attacker); got.Type != "RequestThrottled" {
		t.Errorf("after that try: %s, want RequestThrottled", got.Type)
	}
	if n := strings.Count(b.log.text(), "failed authentication"); n != 1 {
		t.Errorf("%d log lines for a flood of failures within a second, want 1:\n%s", n, b.log.text())
	}
	b.clk.Advance(authlimit.LogEvery)
	guess(attacker)
	if text := b.log.text(); strings.Count(text, "failed authentication") != 2 || !strings.Contains(text, "failures_since_last_line=1") {
		t.Errorf("a second later: log\n%s", text)
	}
}

// stalled is a request whose body has sent part of itself and waits.
type stalled struct {
	pw     *io.PipeWriter
	answer chan answer
}

// stall serves a request from addr whose body is body, declared (or sent
// chunked, without a length), once the API has read all of body but its
// last unsent bytes.
func (b bundle) stall(t *testing.T, addr, body string, unsent int, declared bool) stalled {
	t.Helper()
	pr, pw := io.Pipe()
	r := request("SendMessage", "")
	r.RemoteAddr = addr
	r.Body, r.ContentLength = pr, -1
	if declared {
		r.ContentLength = int64(len(body))
	}
	s := stalled{pw: pw, answer: make(chan answer, 1)}
	go func() { s.answer <- b.do(t, r) }()
	// A pipe's write returns once the reader has all of it.
	if _, err := io.WriteString(pw, body[:len(body)-unsent]); err != nil {
		t.Fatal(err)
	}
	return s
}

// finish sends the rest of body and returns the answer.
func (s stalled) finish(rest string) answer {
	_, _ = io.WriteString(s.pw, rest)
	_ = s.pw.Close()
	return <-s.answer
}

// waits reports whether the API holds got's request waiting on the
// clock, for room to buffer its body; if not, it returns the answer.
func (b bundle) waits(t *testing.T, got <-chan answer) (answer, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocked := make(chan error, 1)
	go func() { blocked <- b.clk.BlockUntil(ctx, 1) }()
	select {
	case a := <-got:
		return a, false
	case <-blocked:
		return answer{}, true
	}
}

// padded is a SendMessage to /q of n bytes, spaces filling it out.
func padded(n int) string {
	head := `{"QueueUrl":"/q","MessageBody":"x"`
	return head + strings.Repeat(" ", n-len(head)-1) + "}"
}

// askFrom asks for the URL of q from addr: a request that sets no timer
// of its own on the clock (a send may, to share a store call), its body
// padded past firstBodyBytes so that it takes room.
func (b bundle) askFrom(t *testing.T, addr string) chan answer {
	got := make(chan answer, 1)
	go func() {
		r := request("GetQueueUrl", `{"QueueName":"q"`+strings.Repeat(" ", 2*firstBodyBytes)+`}`)
		r.RemoteAddr = addr
		got <- b.do(t, r)
	}()
	return got
}

// A request that would take the buffered bytes beyond MaxBufferedBytes
// waits a second for room, then is answered ServiceUnavailable with
// Retry-After; once room is given back, requests go through.
func TestBufferedBytesAreBounded(t *testing.T) {
	b := setup(t, func(c *Config) { c.MaxBufferedBytes = maxRequestBody })
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	// A chunked body holds the room of the bytes it sent: here nearly
	// the largest request, its end not sent yet.
	slow := b.stall(t, "203.0.113.1:1", padded(maxRequestBody-1), 10, false)
	done := b.askFrom(t, "198.51.100.1:1")
	if err := b.clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(bufferWait)
	got := <-done
	if got.status != 503 || got.Type != "ServiceUnavailable" || got.header.Get("Retry-After") != "1" || got.header.Get("X-Amzn-Query-Error") != "ServiceUnavailable;Receiver" {
		t.Fatalf("a request beyond the buffered bytes: %d %s %s, Retry-After %q", got.status, got.Type, got.Msg, got.header.Get("Retry-After"))
	}
	if got := slow.finish(strings.Repeat(" ", 9) + "}"); got.status != 200 {
		t.Fatalf("the slow request: %d %s %s", got.status, got.Type, got.Msg)
	}
	if got := b.call(t, "SendMessage", `{"QueueUrl":"/q","MessageBody":"x"}`); got.status != 200 {
		t.Fatalf("after the room was given back: %d %s %s", got.status, got.Type, got.Msg)
	}
}

// A body holds the room of what it sent, not of what it may send or
// declares: 31 bodies of the largest request that sent a byte each, some
// chunked and some declared, and one declared to fill all but ten bytes
// of what would be left, do not keep a request of another address
// waiting.
func TestBodiesHoldWhatTheySent(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	var held []stalled
	for i := range 31 {
		held = append(held, b.stall(t, fmt.Sprintf("203.0.113.%d:1", i), padded(maxRequestBody), maxRequestBody-1, i%2 == 0))
	}
	held = append(held, b.stall(t, "203.0.113.100:1", padded(DefaultMaxBufferedBytes-31*maxRequestBody-10), 1, true))
	done := b.askFrom(t, "198.51.100.1:1")
	if got, waiting := b.waits(t, done); waiting {
		b.clk.Advance(bufferWait)
		got := <-done
		t.Errorf("a request among bodies that sent a byte each waited for room, then: %d %s %s", got.status, got.Type, got.Msg)
	} else if got.status != 200 {
		t.Errorf("a request among bodies that sent a byte each: %d %s %s", got.status, got.Type, got.Msg)
	}
	for _, s := range held {
		_ = s.pw.CloseWithError(io.ErrUnexpectedEOF)
		<-s.answer
	}
}

// The bodies of one address hold its share of MaxBufferedBytes at most:
// past it, its next request waits a second for room and is answered
// ServiceUnavailable, while another address's goes through at once.
func TestOneAddressHoldsItsShare(t *testing.T) {
	b := setup(t, func(c *Config) { c.MaxBufferedBytes = 4 * maxRequestBody })
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	const greedy, other = "203.0.113.7:1", "198.51.100.1:1"
	// Its share is a quarter, the largest request: one body that sent
	// nearly that.
	big := b.stall(t, greedy, padded(maxRequestBody), 10, true)
	if got, waiting := b.waits(t, b.askFrom(t, other)); waiting || got.status != 200 {
		t.Fatalf("another address's request: waited %v, %d %s %s", waiting, got.status, got.Type, got.Msg)
	}
	got := b.askFrom(t, greedy)
	if a, waiting := b.waits(t, got); !waiting {
		t.Fatalf("a request of the address that holds its share was not held back: %d %s %s", a.status, a.Type, a.Msg)
	}
	b.clk.Advance(bufferWait)
	if a := <-got; a.status != 503 || a.Type != "ServiceUnavailable" || !strings.Contains(a.Msg, "203.0.113.7") || a.header.Get("Retry-After") != "1" {
		t.Fatalf("past the address's share: %d %s %s, Retry-After %q", a.status, a.Type, a.Msg, a.header.Get("Retry-After"))
	}
	if a := big.finish(strings.Repeat(" ", 9) + "}"); a.status != 200 {
		t.Fatalf("the big body: %d %s %s", a.status, a.Type, a.Msg)
	}
	if a := <-b.askFrom(t, greedy); a.status != 200 {
		t.Fatalf("once its body was done, the address's request: %d %s %s", a.status, a.Type, a.Msg)
	}
}

// failingStore fails every enqueue with an error that holds what a
// database error may: a user, a host, SQL.
type failingStore struct{ store.Store }

var errDetail = errors.New(`pq: password authentication failed for user "app" at host db.internal: INSERT INTO messages`)

func (failingStore) Enqueue(context.Context, []store.NewMessage) ([]store.Enqueued, error) {
	return nil, errDetail
}

// A failure on the server's side answers a generic text and the request
// id; the detail goes to the log under that id.
func TestServerErrorsKeepTheirDetailInTheLog(t *testing.T) {
	b := setup(t, func(c *Config) { c.Store = failingStore{c.Store} })
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	got := b.call(t, "SendMessage", `{"QueueUrl":"/q","MessageBody":"x"}`)
	id := got.header.Get("X-Amzn-Requestid")
	if got.status != 500 || strings.Contains(string(got.body), "db.internal") || strings.Contains(string(got.body), "INSERT") || !strings.Contains(got.Msg, id) {
		t.Fatalf("a store failure: %d %s", got.status, got.body)
	}
	if log := b.log.text(); !strings.Contains(log, "request_id="+id) || !strings.Contains(log, "db.internal") {
		t.Fatalf("the log does not hold the detail under request id %s:\n%s", id, log)
	}
}

// Responses carry <, > and & as they are: a receive of ten 1 MiB bodies
// of '<' is about 10 MiB, not six times that.
func TestResponsesAreNotHTMLEscaped(t *testing.T) {
	b := setup(t, nil)
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	body := strings.Repeat("<", 1<<20)
	for range 10 {
		if got := b.call(t, "SendMessage", `{"QueueUrl":"/q","MessageBody":"`+body+`"}`); got.status != 200 {
			t.Fatalf("send: %d %s %s", got.status, got.Type, got.Msg)
		}
	}
	w := httptest.NewRecorder()
	cost := allocated(func() {
		b.api.ServeHTTP(w, request("ReceiveMessage", `{"QueueUrl":"/q","MaxNumberOfMessages":10,"WaitTimeSeconds":0}`))
	})
	var out struct{ Messages []struct{ Body string } }
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || len(out.Messages) != 10 || out.Messages[0].Body != body {
		t.Fatalf("a receive of ten 1 MiB bodies of '<': %d, %d messages, %v", w.Code, len(out.Messages), err)
	}
	if n := w.Body.Len(); n > 10*len(body)+64<<10 {
		t.Fatalf("a receive of ten 1 MiB bodies of '<' is %d bytes", n)
	}
	t.Logf("a receive of ten 1 MiB bodies: %d bytes, %d MiB allocated", w.Body.Len(), cost>>20)
}

// A refused request's connection ends with the answer: what is left of
// its body is not read, whether its length is declared (and under the
// 256 KiB net/http reads of a body a handler left) or not.
func TestRefusedBodiesEndTheirConnection(t *testing.T) {
	b := signedSetup(t)
	srv := httptest.NewServer(b.api)
	defer srv.Close()
	wall := clock.System()
	for what, head := range map[string]string{
		"declared": "Content-Length: 200000\r\n\r\n{",
		"chunked":  "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n",
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(wall.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: h\r\nX-Amz-Target: AmazonSQS.SendMessage\r\n"+head); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		res.Body.Close()
		if res.StatusCode != 403 || !res.Close {
			t.Errorf("%s: %s, closing %v; want 403 and Connection: close", what, res.Status, res.Close)
		}
		// The server closes the connection: the end of file comes, not
		// the client's deadline.
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Errorf("%s: the connection of a refused body stayed open: %v", what, err)
		}
		c.Close()
	}
}

// Requests that send their headers and nothing more hold no room: two
// hundred of one address, declaring the largest body, keep neither that
// address nor another waiting (at 64 KiB each they would hold more than
// the address's share).
func TestHeadersAloneHoldNoRoom(t *testing.T) {
	b := setup(t, func(c *Config) { c.MaxBufferedBytes = 4 * maxRequestBody })
	b.call(t, "CreateQueue", `{"QueueName":"q"}`)
	const addr = "203.0.113.7:1"
	var held []stalled
	for range 200 {
		held = append(held, b.stall(t, addr, padded(maxRequestBody), maxRequestBody, true))
	}
	for _, from := range []string{addr, "198.51.100.1:1"} {
		if got, waiting := b.waits(t, b.askFrom(t, from)); waiting {
			b.clk.Advance(bufferWait)
			t.Errorf("a request of %s among two hundred that sent nothing waited for room", from)
		} else if got.status != 200 {
			t.Errorf("a request of %s among two hundred that sent nothing: %d %s %s", from, got.status, got.Type, got.Msg)
		}
	}
	for _, s := range held {
		_ = s.pw.CloseWithError(io.ErrUnexpectedEOF)
		<-s.answer
	}
}
