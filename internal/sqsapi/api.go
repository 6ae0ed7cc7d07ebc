// Package sqsapi serves the Amazon SQS API, in its JSON and query
// protocols, over a leasehold store, so that the AWS SDKs of every
// language, old and new, send to and receive from leasehold queues
// unchanged.
//
// The mapping: a queue is a leasehold queue, recorded with its SQS
// attributes; ReceiveMessage claims under a lease of the visibility
// timeout; the receipt handle names that lease (message and fencing
// token), so DeleteMessage completes and ChangeMessageVisibility extends
// or releases under it: on a standard queue while no other receive has
// taken the message (the token is the fence, and a handle of a message
// received again since gets ReceiptHandleIsInvalid and changes nothing),
// on a FIFO queue while the lease is current (else SQS's expired-handle
// error). On a FIFO queue MessageGroupId is the message's key (a
// receive takes up to ten of a group together, in order, with a claim
// with runs, and the group's next go once they are done); on a standard
// queue it is kept with the message and orders nothing, as in SQS.
// MessageDeduplicationId is the dedup id, and a redrive policy's
// maxReceiveCount the delivery budget: past it the message moves to the
// policy's dead-letter queue (deadletters.go), from where message move
// tasks move it back (movetasks.go). Message ids are UUIDs that map one
// to one to the store's ids (internal/sqsid).
package sqsapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/semaphore"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/authlimit"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/sigv4"
	"github.com/leasehold/leasehold/internal/sqsid"
	"github.com/leasehold/leasehold/store"
)

const contentType = "application/x-amz-json-1.0"

// targetPrefix starts the X-Amz-Target header of every SQS request.
const targetPrefix = "AmazonSQS."

// maxRequestBody bounds a request's body at the largest valid request:
// a SendMessageBatch whose messages, attributes included, add up to SQS's
// 1 MiB. That mebibyte counts text as its UTF-8 bytes and binary values
// as their bytes; in JSON, one byte of text takes at most six ("\u0041"
// is a valid way to write "A"), and one byte of binary at most eight
// (base64's four characters per three bytes, each written as an escape).
// So 8 MiB covers the worst a client may legally send; 256 KiB more covers
// what is not counted in the mebibyte: the keys and punctuation, ten
// entry ids, group and deduplication ids, and whitespace. The AWS SDKs
// send far less: no escapes but for quotes, backslashes and (boto3)
// characters beyond ASCII, three bytes each at worst.
const maxRequestBody = 8<<20 + 256<<10

// bufferWait is how long a request waits for room among the bytes all
// requests may buffer before it is answered ServiceUnavailable.
const bufferWait = time.Second

// Defaults of Config.
const (
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "000000000000"
	// DefaultCacheTTL is how long a queue's record is used before it is
	// read again: a change of its attributes made by another server takes
	// effect here within it.
	DefaultCacheTTL = time.Second
	// DefaultMaxBufferedBytes bounds the request bodies held in memory
	// at once, all requests together.
	DefaultMaxBufferedBytes = 256 << 20
	// DefaultMaxQueues is how many queues the store may hold before
	// CreateQueue refuses new ones.
	DefaultMaxQueues = 10_000
)

// Config configures an API.
type Config struct {
	// Store holds the queues. Required.
	Store store.Store
	// ReceiptKey keys the MAC of every receipt handle the API issues, at
	// least MinReceiptKey bytes. Required. Servers of one database share
	// it, so that a handle one issued another accepts; anyone who has it
	// can forge handles.
	ReceiptKey []byte
	// MessageIDs maps the store's message ids to the UUIDs the API gives
	// as MessageId. Required: servers, the dashboard and the command of
	// one database share it, so that they name a message alike.
	MessageIDs sqsid.Mapper
	// Verifier, when set, checks every request's signature: a request
	// without a valid one is refused with 403 and changes nothing. Nil
	// accepts unsigned requests.
	Verifier *sigv4.Verifier
	// Region and AccountID make up queue ARNs, Region for unsigned
	// requests alone: a signed request's ARNs name the region it was
	// signed for. Defaults DefaultRegion and DefaultAccountID; queue URLs
	// carry AccountID too.
	Region, AccountID string
	// WorkerID names this server in the leases it takes. Default: a new
	// worker id (host, process, random suffix).
	WorkerID string
	// PollInterval bounds how long a long poll waits before it looks again
	// when no wakeup arrives. Default mailbox.DefaultPollInterval.
	PollInterval time.Duration
	// CacheTTL is how long a queue's record is used before it is read
	// again. Default DefaultCacheTTL.
	CacheTTL time.Duration
	// Clock times long polls, signatures and the cache. Default: the
	// system clock.
	Clock clock.Clock
	// Logger receives a line per request that failed on the server's side.
	// Default slog.Default().
	Logger *slog.Logger
	// MaxBufferedBytes bounds the bytes of request bodies held in memory
	// at once, all requests together: a request that would go beyond it
	// waits up to a second for room, then is answered ServiceUnavailable
	// (HTTP 503, Retry-After), which the AWS SDKs retry. A body takes
	// room as its bytes arrive, whatever its Content-Length says: 64 KiB
	// first, then as much again as it holds each time it is full, so at
	// most twice what it sent; once read, it holds its length. The
	// bodies of one client address hold a quarter of MaxBufferedBytes at
	// most, and no more than 32 MiB, but always room for the largest
	// valid request (8.25 MiB), so that one address cannot take the room
	// of all. Default DefaultMaxBufferedBytes; it must be at least the
	// largest valid request.
	MaxBufferedBytes int64
	// BehindTLSProxy says that clients reach the API over HTTPS through a
	// proxy that ends TLS: queue URLs are https ones.
	BehindTLSProxy bool
	// AuthLimiter slows the client addresses that fail to authenticate;
	// a server shares one among its faces. Default: one of the API's own.
	AuthLimiter *authlimit.Limiter
	// MaxQueues bounds the queues: CreateQueue of a queue that does not
	// exist yet, when the store lists this many queues (store.Store's
	// Queues: those made by CreateQueue and those that Go programs made by
	// sending), is refused with OverLimit and changes nothing. A server
	// counts the queues once a CacheTTL and keeps the count up to date
	// with its own creates and deletes, one create at a time, so that
	// alone it never goes past the bound; servers sharing a database see
	// each other's new queues within a CacheTTL, and may together go past
	// the bound by as many queues as the others created within it. A
	// queue deleted by another server, or by a program, makes room within
	// a CacheTTL. Default DefaultMaxQueues; must not be negative.
	MaxQueues int
	// MeterProvider gets leasehold.sqs.requests and
	// leasehold.sqs.request.duration, by action. Default: the global
	// OpenTelemetry provider.
	MeterProvider metric.MeterProvider
}

// API is an http.Handler of the SQS API. It is safe for concurrent use.
type API struct {
	cfg Config
	st  store.Store
	clk clock.Clock
	log *slog.Logger

	// drain ends when Drain is called: long polls return at once.
	drain     context.Context
	stopDrain context.CancelFunc

	receipts receipts

	mu    sync.Mutex
	cache map[string]cached
	// policies is held while a queue's Policy is read and changed.
	policies sync.Mutex
	// creating is held while a new queue is checked against MaxQueues
	// and created, and guards queues: how many queues the store listed
	// at countedAt, with this server's creates and deletes since.
	creating  countLock
	queues    int
	counted   bool
	countedAt time.Duration
	// deleted holds, under creating, when (Monotonic) this server
	// deleted the queues it deleted within the cooldown, by name.
	deleted map[string]time.Duration
	// purges is held while a queue's last purge is checked and noted.
	purges sync.Mutex

	acts map[string]action
	// completions, enqueues and receives share store calls among
	// requests.
	completions *coalescer[store.Completion, error]
	enqueues    *coalescer[store.NewMessage, store.Enqueued]
	receives    *sharedClaims
	requests    metric.Int64Counter
	duration    metric.Float64Histogram
	// buffered accounts the bytes of the request bodies in memory.
	buffered *bodies
	// authFailures slows the addresses that fail to authenticate.
	authFailures *authlimit.Limiter
	// movers run the message move tasks (movetasks.go).
	movers movers
}

type cached struct {
	q  *queue
	at time.Duration
}

// New returns the API of cfg.Store.
func New(cfg Config) (*API, error) {
	if cfg.Store == nil {
		return nil, errors.New("sqsapi: Store is nil")
	}
	if len(cfg.ReceiptKey) < MinReceiptKey {
		return nil, fmt.Errorf("sqsapi: ReceiptKey has %d bytes, needs at least %d", len(cfg.ReceiptKey), MinReceiptKey)
	}
	if cfg.MessageIDs.MessageID(1) == "" {
		return nil, errors.New("sqsapi: MessageIDs is the zero Mapper")
	}
	if cfg.MaxQueues < 0 {
		return nil, fmt.Errorf("sqsapi: MaxQueues (%d) must not be negative", cfg.MaxQueues)
	}
	if cfg.PollInterval < 0 || cfg.CacheTTL < 0 {
		return nil, fmt.Errorf("sqsapi: PollInterval (%s) and CacheTTL (%s) must not be negative", cfg.PollInterval, cfg.CacheTTL)
	}
	if cfg.MaxBufferedBytes == 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.MaxBufferedBytes < maxRequestBody {
		return nil, fmt.Errorf("sqsapi: MaxBufferedBytes (%d) must be at least %d, the largest valid request", cfg.MaxBufferedBytes, maxRequestBody)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.AccountID == "" {
		cfg.AccountID = DefaultAccountID
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = mailbox.NewWorkerID()
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = mailbox.DefaultPollInterval
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.MaxQueues == 0 {
		cfg.MaxQueues = DefaultMaxQueues
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	m := cfg.MeterProvider.Meter("github.com/leasehold/leasehold")
	requests, err1 := m.Int64Counter("leasehold.sqs.requests", metric.WithUnit("{request}"),
		metric.WithDescription("SQS API requests by action and outcome: ok, the error code, or cancelled when the client went away first."))
	duration, err2 := m.Float64Histogram("leasehold.sqs.request.duration", metric.WithUnit("s"),
		metric.WithDescription("How long SQS API requests took, by action, long polls included."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("sqsapi: metrics: %w", err)
	}
	a := &API{cfg: cfg, st: cfg.Store, clk: clock.OrSystem(cfg.Clock), log: cfg.Logger, cache: map[string]cached{}, deleted: map[string]time.Duration{},
		receipts: receipts{key: bytes.Clone(cfg.ReceiptKey)}, requests: requests, duration: duration}
	a.buffered = newBodies(a.clk, cfg.MaxBufferedBytes)
	a.authFailures = cfg.AuthLimiter
	if a.authFailures == nil {
		a.authFailures = authlimit.New(a.clk, a.log, authlimit.Options{})
	}
	a.drain, a.stopDrain = context.WithCancel(context.Background())
	a.acts = a.actions()
	a.completions = newCoalescer(a.clk, a.st.Complete)
	a.enqueues = newCoalescer(a.clk, a.st.Enqueue)
	a.receives = &sharedClaims{Store: a.st, clk: a.clk, claims: map[claimKey]*sharedClaim{}, runs: map[string]*runClaim{}}
	return a, nil
}

// Drain makes every long poll, running or to come, return at once,
// empty, once its claim in progress (if any) has answered: for a server
// that is stopping.
func (a *API) Drain() { a.stopDrain() }

// action is one SQS action: it decodes its input from the request and
// returns its output, which is encoded in the request's protocol.
type action func(ctx context.Context, c *call) (any, error)

// call is one request.
type call struct {
	r    *http.Request
	body []byte
	// query says the request is of the query protocol; form holds its
	// parameters once read.
	query bool
	form  *formNode
	// action is the action's name; target what the request named it
	// (X-Amz-Target, or Action).
	action, target string
	// queuePath is the queue URL the request was sent to, if any: the
	// queue of an input that names none.
	queuePath string
}

// newCall is the call of r, as far as its headers and URL tell.
func (a *API) newCall(r *http.Request) *call {
	c := &call{r: r, query: isQuery(r), queuePath: a.queuePath(r)}
	if c.query {
		c.target = r.URL.Query().Get("Action")
		c.action = c.target
	} else {
		c.target = r.Header.Get("X-Amz-Target")
		c.action = strings.TrimPrefix(c.target, targetPrefix)
	}
	return c
}

// decode reads the request's input into v: its JSON, once within SQS's
// limits and Unicode (scanInput), or its form. An input of an action on
// one queue that names none names the queue the request was sent to.
func (c *call) decode(v any) error {
	if c.form != nil {
		if err := c.form.decode(v, c.action); err != nil {
			return err
		}
	} else if err := scanInput(c.body); err != nil {
		return err
	} else if err := json.NewDecoder(bytes.NewReader(c.body)).Decode(v); err != nil && len(bytes.TrimSpace(c.body)) > 0 {
		return errInvalidParameter.f("the request body is not the JSON this action takes: %v", err)
	}
	if q, ok := v.(interface{ defaultQueue(string) }); ok && c.queuePath != "" {
		q.defaultQueue(c.queuePath)
	}
	return nil
}

func (a *API) actions() map[string]action {
	return map[string]action{
		"CreateQueue":                  a.createQueue,
		"GetQueueUrl":                  a.getQueueURL,
		"ListQueues":                   a.listQueues,
		"DeleteQueue":                  a.deleteQueue,
		"PurgeQueue":                   a.purgeQueue,
		"GetQueueAttributes":           a.getQueueAttributes,
		"SetQueueAttributes":           a.setQueueAttributes,
		"TagQueue":                     a.tagQueue,
		"UntagQueue":                   a.untagQueue,
		"ListQueueTags":                a.listQueueTags,
		"SendMessage":                  a.sendMessage,
		"SendMessageBatch":             a.sendMessageBatch,
		"ReceiveMessage":               a.receiveMessage,
		"DeleteMessage":                a.deleteMessage,
		"DeleteMessageBatch":           a.deleteMessageBatch,
		"ChangeMessageVisibility":      a.changeMessageVisibility,
		"ChangeMessageVisibilityBatch": a.changeMessageVisibilityBatch,
		"AddPermission":                a.addPermission,
		"RemovePermission":             a.removePermission,
		"ListDeadLetterSourceQueues":   a.listDeadLetterSourceQueues,
		"StartMessageMoveTask":         a.startMessageMoveTask,
		"ListMessageMoveTasks":         a.listMessageMoveTasks,
		"CancelMessageMoveTask":        a.cancelMessageMoveTask,
	}
}

// ServeHTTP answers one SQS request.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := a.clk.Monotonic()
	id := requestID()
	w.Header().Set("X-Amzn-Requestid", id)
	c := a.newCall(r)
	out, err := a.serve(w, c)
	name := c.action
	outcome := "ok"
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = fromStore(err)
		}
		// A failure of the server's own is logged, with its detail, under
		// the request's id, which the answer names; an overloaded or
		// stopping server (503) is not worth a line per request.
		switch {
		case abandoned(r, ae):
			// The client went away (a long poll it gave up, a closed
			// connection): nothing failed, and nobody reads the answer.
			outcome = "cancelled"
		case ae.status == http.StatusInternalServerError:
			var detail error = ae
			if ae.cause != nil {
				detail = ae.cause
			}
			a.log.Error("sqs request failed", "request_id", id, "action", name, "error", detail)
			ae = &apiError{status: ae.status, shape: ae.shape, code: ae.code, server: true,
				message: fmt.Sprintf("the server failed; its log has the detail under request id %s", id)}
		}
		if outcome == "ok" {
			outcome = ae.code
		}
		switch {
		case c.query && acceptsJSON(r):
			writeQueryJSONError(w, ae, id)
		case c.query:
			writeXMLError(w, ae, id)
		default:
			writeError(w, ae)
		}
	} else {
		if o, ok := out.(interface{ serverCauses() []error }); ok {
			for _, cause := range o.serverCauses() {
				a.log.Error("sqs batch entry failed", "request_id", id, "action", name, "error", cause)
			}
		}
		switch {
		case c.query && acceptsJSON(r):
			w.Header().Set("Content-Type", queryJSONContentType)
			_ = encodeQueryJSON(w, name, id, out)
		case c.query:
			w.Header().Set("Content-Type", xmlContentType)
			_ = encodeXML(w, name, id, out)
		default:
			w.Header().Set("Content-Type", contentType)
			_ = encodeJSON(w, out)
		}
	}
	if _, known := a.acts[name]; !known {
		name = "unknown"
	}
	ctx := context.WithoutCancel(r.Context())
	a.requests.Add(ctx, 1, metric.WithAttributes(attribute.String("action", name), attribute.String("outcome", outcome)))
	a.duration.Record(ctx, (a.clk.Monotonic() - start).Seconds(), metric.WithAttributes(attribute.String("action", name)))
}

// serve answers a request: it checks what the headers say, reads the
// body, checks the signature over it, and runs the action. A request
// refused before its body is read has its connection closed after the
// answer, so that the body is never read at all.
func (a *API) serve(w http.ResponseWriter, c *call) (any, error) {
	r, name := c.r, c.action
	if r.Method != http.MethodPost && !(c.query && r.Method == http.MethodGet) {
		return nil, errInvalidAction.f("SQS requests are POST requests (or, in the query protocol, GET requests), not %s", r.Method)
	}
	if a.cfg.Verifier == nil && fromWebPage(r) {
		closeAfter(w)
		return nil, authError("AccessDenied", "a request from a web page is refused by a server that checks no signatures: set the server's credentials (LEASEHOLD_ACCESS_KEY_ID, LEASEHOLD_SECRET_ACCESS_KEY) and sign it")
	}
	var signed *sigv4.Signed
	addr := a.authFailures.Client(r)
	if a.cfg.Verifier != nil {
		if ok, wait := a.authFailures.Allow(addr); !ok {
			closeAfter(w)
			return nil, errThrottled.f("too many requests from %s failed authentication; retry later", addr).retryIn(wait)
		}
		var err error
		if signed, err = a.cfg.Verifier.Check(r); err != nil {
			a.authFailures.Failed(addr, "SQS "+name, err)
			closeAfter(w)
			return nil, refused(err)
		}
	}
	body, release, err := a.readBody(w, r, name)
	if err != nil {
		return nil, err
	}
	defer release()
	if signed != nil {
		if err := signed.Verify(body); err != nil {
			a.authFailures.Failed(addr, "SQS "+name, err)
			return nil, refused(err)
		}
	}
	if c.query {
		form, err := parseForm(r, body)
		if err != nil {
			return nil, err
		}
		c.form = form
		if c.target == "" {
			c.target = form.action()
			c.action = c.target
		}
		if c.target == "" {
			return nil, errMissingAction.f("the request must contain the parameter Action (query protocol), or the header X-Amz-Target: AmazonSQS.<Action> (JSON protocol)")
		}
	} else if c.target == "" {
		return nil, errInvalidAction.f("the request has no X-Amz-Target header: the SQS JSON protocol names the action in it (X-Amz-Target: AmazonSQS.<Action>, Content-Type: %s)", contentType)
	}
	act, ok := a.acts[c.action]
	if !ok || c.query && c.queuePath != "" && !queueEndpointAction(c.action) {
		return nil, errInvalidAction.f("The action %s is not valid for this endpoint.", c.target)
	}
	c.body = body
	return act(r.Context(), c)
}

// queueEndpointAction reports whether a query request sent to a queue's
// URL may name action: Amazon SQS refuses there the actions that are
// not about one queue, CreateQueue and ListQueues.
func queueEndpointAction(action string) bool {
	return action != "CreateQueue" && action != "ListQueues"
}

// abandoned reports whether err ended a request because its client went
// away: the request's context ended, and what failed was not the
// client's input.
func abandoned(r *http.Request, ae *apiError) bool {
	return r.Context().Err() != nil && (ae.server || ae.status >= 500)
}

// fromWebPage reports whether a browser sent r on behalf of a web page:
// it names the page's origin, or says that the request crossed sites.
// Without signatures, such requests are refused: a query-protocol
// request (a GET, or a form POST) is one a browser sends from any page
// without asking the server first, so any page a developer opens could
// otherwise purge or delete the queues of a server on their machine.
// The SDKs and command-line clients send neither header.
func fromWebPage(r *http.Request) bool {
	if r.Header.Get("Origin") != "" {
		return true
	}
	site := r.Header.Get("Sec-Fetch-Site")
	return site != "" && site != "none"
}

// refused is the error of a request whose signature was refused.
func refused(err error) *apiError {
	var se *sigv4.Error
	if errors.As(err, &se) {
		return authError(se.Code, se.Message)
	}
	return authError(sigv4.CodeMismatch, err.Error())
}

// closeAfter closes the request's connection after the answer, without
// reading what is left of its body: the read deadline passes at once, so
// that net/http, which reads some of a body left unread once the handler
// is done, reads none of it and the connection ends with the answer.
func closeAfter(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(clock.System().Now().Add(-time.Second))
}

// firstBodyBytes are the bytes of a body read before it takes room in
// MaxBufferedBytes; every open connection may hold that much. Past them a
// body takes room as it grows, doubling: what a body holds follows what
// it sent, not what it declares.
const firstBodyBytes = 4 << 10

// maxAddrShare bounds an address's share of MaxBufferedBytes.
const maxAddrShare = 32 << 20

// addrShare is how much of size the bodies of one client address may
// hold at once: a quarter, so that at least four addresses fit; at most
// maxAddrShare (an eighth of the default), four times the largest valid
// request, more than a client has in flight, since a body is held only
// while it arrives and while its request runs; and at least the largest
// valid request, so that any address may send one.
func addrShare(size int64) int64 {
	return max(maxRequestBody, min(size/4, maxAddrShare))
}

// bodies accounts the request bodies in memory: all of them together
// within the whole, and those of each client address within its share.
type bodies struct {
	clk   clock.Clock
	whole *semaphore.Weighted
	size  int64
	share int64

	mu    sync.Mutex
	addrs map[string]*addrBodies
}

// addrBodies is one address's share, and how many requests use it.
type addrBodies struct {
	sem   *semaphore.Weighted
	users int
}

func newBodies(clk clock.Clock, size int64) *bodies {
	return &bodies{clk: clk, whole: semaphore.NewWeighted(size), size: size, share: addrShare(size),
		addrs: map[string]*addrBodies{}}
}

// holder is the room one request's body holds.
type holder struct {
	b    *bodies
	addr string
	own  *addrBodies
	held int64
}

// holder returns the room of a request from addr; done gives it back.
func (b *bodies) holder(addr string) *holder {
	b.mu.Lock()
	defer b.mu.Unlock()
	own := b.addrs[addr]
	if own == nil {
		own = &addrBodies{sem: semaphore.NewWeighted(b.share)}
		b.addrs[addr] = own
	}
	own.users++
	return &holder{b: b, addr: addr, own: own}
}

// take adds n bytes to the room held, once the address's share and the
// whole have room for them; it waits up to bufferWait for it, then
// fails with ServiceUnavailable.
func (h *holder) take(ctx context.Context, n int64) error {
	var wait context.Context
	cancel := func() {}
	defer func() { cancel() }()
	acquire := func(sem *semaphore.Weighted) error {
		if sem.TryAcquire(n) {
			return nil
		}
		// Full: wait a little for room, rather than refuse at once.
		if wait == nil {
			wait, cancel = clock.WithTimeout(ctx, h.b.clk, bufferWait)
		}
		return sem.Acquire(wait, n)
	}
	if acquire(h.own.sem) != nil {
		return errUnavailable.f("the requests from %s hold as many body bytes as one address may (%d); retry later", h.addr, h.b.share).retryIn(time.Second)
	}
	if acquire(h.b.whole) != nil {
		h.own.sem.Release(n)
		return errUnavailable.f("the server holds as many request bodies as it may (%d bytes); retry later", h.b.size).retryIn(time.Second)
	}
	h.held += n
	return nil
}

// give gives back n bytes of the room held.
func (h *holder) give(n int64) {
	h.own.sem.Release(n)
	h.b.whole.Release(n)
	h.held -= n
}

// done gives back all the room held.
func (h *holder) done() {
	h.give(h.held)
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.own.users--; h.own.users == 0 {
		delete(h.b.addrs, h.addr)
	}
}

// readBody reads r's body, taking room for it among the bytes all
// requests, and those of its client address, buffer (MaxBufferedBytes)
// as its bytes arrive; release gives the room back.
func (a *API) readBody(w http.ResponseWriter, r *http.Request, name string) (body []byte, release func(), err error) {
	tooLong := func() *apiError {
		closeAfter(w)
		kind := errInvalidParameter
		if name == "SendMessageBatch" {
			kind = errBatchTooLong
		}
		return kind.f("the request body is over %d bytes, more than the largest valid request", maxRequestBody)
	}
	n := r.ContentLength
	switch {
	case n == 0:
		return nil, func() {}, nil
	case n > maxRequestBody:
		return nil, nil, tooLong()
	}
	limit, src := n, r.Body
	if n < 0 {
		limit, src = maxRequestBody, http.MaxBytesReader(w, r.Body, maxRequestBody)
	}
	h := a.buffered.holder(a.authFailures.Client(r))
	body, err = h.read(r.Context(), src, limit, n > 0)
	if err != nil {
		h.done()
		if _, ok := errors.AsType[*apiError](err); ok {
			closeAfter(w)
			return nil, nil, err
		}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, nil, tooLong()
		}
		closeAfter(w)
		return nil, nil, errInvalidParameter.f("the request body cannot be read: %v", err)
	}
	return body, h.done, nil
}

// read reads src, up to limit bytes (exactly limit when declared), into
// a buffer that grows as the bytes arrive: firstBodyBytes without room,
// then twice its size each time it is full, the room for the whole
// buffer taken before each growth. So a body holds at most twice the
// bytes it sent, and a body of n bytes costs about 2n of allocations.
// The buffer returned holds its bytes and no more, and so does the room.
func (h *holder) read(ctx context.Context, src io.Reader, limit int64, declared bool) ([]byte, error) {
	// The first bytes are read before any room is taken, so that a
	// request that sends its headers and nothing more holds none of it.
	buf := make([]byte, 0, min(limit, firstBodyBytes))
	taken := int64(0) // the room taken: the buffer's size past its first bytes
	for {
		if len(buf) == cap(buf) {
			if int64(cap(buf)) == limit {
				if declared {
					return buf, nil
				}
				// At the largest: only the end may follow, or an error
				// that the body is too long.
				var one [1]byte
				if _, err := io.ReadFull(src, one[:]); err != io.EOF {
					return nil, cmp.Or(err, error(&http.MaxBytesError{Limit: limit}))
				}
				return buf, nil
			}
			// Doubling: a body holds at most twice what it has sent.
			size := min(limit, 2*int64(cap(buf)))
			if err := h.take(ctx, size-taken); err != nil {
				return nil, err
			}
			taken = size
			next := make([]byte, len(buf), size)
			copy(next, buf)
			buf = next
		}
		m, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		switch {
		case err == io.EOF && declared && int64(len(buf)) < limit:
			return nil, io.ErrUnexpectedEOF
		case err == io.EOF:
			if len(buf) < cap(buf) {
				buf = bytes.Clone(buf)
				if spare := taken - int64(len(buf)); spare > 0 {
					h.give(spare)
				}
			}
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
}

// queueURL is the URL of a queue, on the host the request was sent to.
func (a *API) queueURL(r *http.Request, name string) string {
	scheme := "http"
	if r.TLS != nil || a.cfg.BehindTLSProxy {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/" + a.cfg.AccountID + "/" + url.PathEscape(name)
}

// queueARN is the ARN of a queue, in the region r was signed for (its
// credential scope's), else Config.Region. Regions name no queues of
// their own: the same name in two regions is the same queue.
func (a *API) queueARN(r *http.Request, name string) string {
	return "arn:aws:sqs:" + cmp.Or(sigv4.Region(r), a.cfg.Region) + ":" + a.cfg.AccountID + ":" + name
}

// queueName reads a queue's name from its URL: the last segment of the
// path. A bare name is taken as it is.
func queueName(u string) (string, error) {
	if u == "" {
		return "", errMissingParameter.f("The request must contain the parameter QueueUrl.")
	}
	p, err := url.Parse(u)
	if err != nil {
		return "", errInvalidAddress.f("the address %q is not a queue URL", u)
	}
	path := strings.TrimSuffix(p.EscapedPath(), "/")
	name, err := url.PathUnescape(path[strings.LastIndexByte(path, '/')+1:])
	if err != nil || name == "" {
		return "", errInvalidAddress.f("the address %q is not a queue URL", u)
	}
	return name, nil
}

// lookup returns the queue a QueueUrl names, from the cache while it is
// fresh. A queue that holds messages but has no record (one that Go
// programs use) is recorded with SQS's defaults the first time it is
// asked for.
func (a *API) lookup(ctx context.Context, queueURL string) (*queue, error) {
	name, err := queueName(queueURL)
	if err != nil {
		return nil, err
	}
	now := a.clk.Monotonic()
	a.mu.Lock()
	c, ok := a.cache[name]
	a.mu.Unlock()
	if ok && now-c.at < a.cfg.CacheTTL {
		return c.q, nil
	}
	rec, err := a.st.QueueInfo(ctx, name)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
		rec, err = a.adopt(ctx, name)
	}
	if err != nil {
		return nil, err
	}
	return a.remember(rec, now), nil
}

// adopt records a queue that holds messages, or is paused, but has no
// record.
func (a *API) adopt(ctx context.Context, name string) (store.QueueInfo, error) {
	held, err := a.holds(ctx, name)
	if err != nil {
		return store.QueueInfo{}, err
	}
	if !held {
		return store.QueueInfo{}, errQueueDoesNotExist.f("The specified queue does not exist.")
	}
	var attrs map[string]string
	if isFifoName(name) {
		attrs = map[string]string{attrFifo: "true"}
	}
	rec, _, err := a.st.CreateQueue(ctx, name, attrs)
	return rec, err
}

// holds reports whether the store has a queue of the name without its
// record: one that holds messages or is paused. It reads the queue's own
// counts, a few index probes for a queue that has none, never a list of
// every queue. A name the store refuses names no queue.
func (a *API) holds(ctx context.Context, name string) (bool, error) {
	st, err := a.st.Stats(ctx, name)
	if errors.Is(err, store.ErrInvalid) {
		return false, nil
	}
	return err == nil && st != (store.Stats{Queue: name}), err
}

func (a *API) remember(rec store.QueueInfo, at time.Duration) *queue {
	q := newQueue(rec)
	a.mu.Lock()
	a.cache[rec.Queue] = cached{q: q, at: at}
	a.mu.Unlock()
	return q
}

func (a *API) forget(name string) {
	a.mu.Lock()
	delete(a.cache, name)
	a.mu.Unlock()
}

// requestID is the x-amzn-RequestId of a response.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
