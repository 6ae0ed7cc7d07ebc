package serve_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/store"
)

// The SQS benchmarks drive a real server (system clock, real listener,
// its background loops running) with the AWS SDK for Go, as an
// application would: the SDK client, the server and the database share
// the machine. docs/benchmarks.md ("Current figures") has the figures.

const (
	// benchConsumers receive and delete concurrently.
	benchConsumers = 32
	// benchProducers send batches of 10 concurrently. A send batch is one
	// request per 10 messages, a consumer's receive and delete two; with
	// every request in flight getting about the same share of the CPU,
	// 32 consumers are matched by about 16 producers. Fewer let the queue
	// run short, and consumers sit in long polls: on PostgreSQL, 4
	// producers kept a mean backlog of 101.5 and 8 of 199.3 (consumers
	// hold up to 320), 16 of 865.4. More cost
	// little, for they wait on the backlog bound.
	benchProducers = 16
	// benchBacklog bounds the messages sent and not yet deleted (waiting,
	// or held by consumers): enough that a receive finds 10, and a small,
	// steady table rather than one filled beforehand and drained. Every
	// message is sent within the timed stretch, as it is received and
	// deleted.
	benchBacklog = 2000
	// benchPayload is the size of a message body, as bench's default.
	benchPayload = 100
	// benchBatch is SQS's largest batch.
	benchBatch = 10
)

// benchServer runs a server on st and returns an SDK client of it that
// keeps a connection per goroutine and does not retry, so that each call
// is one request.
func benchServer(b *testing.B, st store.Store) *sqs.Client {
	b.Helper()
	addr, hc := benchListen(b, st)
	return sqs.New(sqs.Options{BaseEndpoint: aws.String("http://" + addr), Region: "us-east-1",
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1, HTTPClient: hc})
}

// benchListen runs a server on st and returns its address and an HTTP
// client that keeps a connection per goroutine.
func benchListen(b *testing.B, st store.Store) (string, *http.Client) {
	b.Helper()
	srv, err := serve.New(serve.Config{Store: st, Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		b.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(context.Background()) }()
	b.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			b.Errorf("Shutdown: %v", err)
		}
		if err := <-ran; err != nil {
			b.Errorf("Run: %v", err)
		}
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4 * (benchConsumers + benchProducers)
	tr.MaxIdleConnsPerHost = tr.MaxIdleConns
	hc := &http.Client{Transport: tr}
	b.Cleanup(hc.CloseIdleConnections)
	return srv.Addr(), hc
}

func benchQueue(b *testing.B, c *sqs.Client) string {
	b.Helper()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("bench")})
	if err != nil {
		b.Fatal(err)
	}
	return *out.QueueUrl
}

// benchBody is message i's body: its number, padded to benchPayload bytes.
func benchBody(i int) string {
	s := strconv.Itoa(i) + "."
	return s + strings.Repeat("x", max(0, benchPayload-len(s)))
}

func benchNumber(body string) (int, error) {
	n, _, ok := strings.Cut(body, ".")
	if !ok {
		return 0, fmt.Errorf("message body %q is not the benchmark's", body)
	}
	return strconv.Atoi(n)
}

// benchMsg is a received message.
type benchMsg struct {
	body   string
	handle *string     // SQS
	lease  store.Lease // store
}

// benchOps is a queue as the throughput harness uses it.
type benchOps interface {
	// send sends a batch.
	send(ctx context.Context, bodies []string) error
	// receive takes up to benchBatch messages, waiting up to 1 s.
	receive(ctx context.Context) ([]benchMsg, error)
	// delete deletes received messages; it fails unless all are.
	delete(ctx context.Context, ms []benchMsg) error
	// empty fails unless the queue is empty.
	empty(ctx context.Context) error
}

// sqsOps is the queue through the SQS API.
type sqsOps struct {
	c   *sqs.Client
	url *string
	// group, when set, is every message's MessageGroupId.
	group *string
}

func (o sqsOps) send(ctx context.Context, bodies []string) error {
	entries := make([]types.SendMessageBatchRequestEntry, len(bodies))
	for i, body := range bodies {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body), MessageGroupId: o.group}
	}
	out, err := o.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: o.url, Entries: entries})
	if err != nil {
		return fmt.Errorf("SendMessageBatch: %w", err)
	}
	if len(out.Failed) > 0 || len(out.Successful) != len(entries) {
		return fmt.Errorf("SendMessageBatch: %d sent, %d failed: %+v", len(out.Successful), len(out.Failed), out.Failed)
	}
	return nil
}

func (o sqsOps) receive(ctx context.Context) ([]benchMsg, error) {
	out, err := o.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: o.url, MaxNumberOfMessages: benchBatch, WaitTimeSeconds: 1})
	if err != nil {
		return nil, fmt.Errorf("ReceiveMessage: %w", err)
	}
	ms := make([]benchMsg, len(out.Messages))
	for i, m := range out.Messages {
		ms[i] = benchMsg{body: *m.Body, handle: m.ReceiptHandle}
	}
	return ms, nil
}

func (o sqsOps) delete(ctx context.Context, ms []benchMsg) error {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(ms))
	for i, m := range ms {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.handle}
	}
	out, err := o.c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: o.url, Entries: entries})
	if err != nil {
		return fmt.Errorf("DeleteMessageBatch: %w", err)
	}
	if len(out.Failed) > 0 || len(out.Successful) != len(entries) {
		return fmt.Errorf("DeleteMessageBatch: %d deleted, %d failed: %+v", len(out.Successful), len(out.Failed), out.Failed)
	}
	return nil
}

func (o sqsOps) empty(ctx context.Context) error {
	out, err := o.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: o.url,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
	if err != nil {
		return err
	}
	if a := out.Attributes; a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
		return fmt.Errorf("the queue is not empty after the run: %v", a)
	}
	return nil
}

// storeOps is the queue through the store, as the API uses it: Enqueue
// for a send, a mailbox's long-polling Receive with SQS's default
// visibility timeout for a receive, Complete for a delete.
type storeOps struct {
	st    store.Store
	queue string
	mb    *mailbox.Mailbox
}

func (o storeOps) send(ctx context.Context, bodies []string) error {
	msgs := make([]store.NewMessage, len(bodies))
	for i, body := range bodies {
		msgs[i] = store.NewMessage{Queue: o.queue, Payload: []byte(body)}
	}
	_, err := o.st.Enqueue(ctx, msgs)
	return err
}

func (o storeOps) receive(ctx context.Context) ([]benchMsg, error) {
	got, err := o.mb.Receive(ctx, mailbox.ReceiveOptions{Max: benchBatch, Visibility: 30 * time.Second, Wait: time.Second})
	if err != nil {
		return nil, err
	}
	ms := make([]benchMsg, len(got))
	for i, m := range got {
		ms[i] = benchMsg{body: string(m.Payload), lease: m.Lease}
	}
	return ms, nil
}

func (o storeOps) delete(ctx context.Context, ms []benchMsg) error {
	cs := make([]store.Completion, len(ms))
	for i, m := range ms {
		cs[i] = store.Completion{Lease: m.lease}
	}
	errs, err := o.st.Complete(ctx, cs)
	if err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (o storeOps) empty(ctx context.Context) error {
	s, err := o.st.Stats(ctx, o.queue)
	if err != nil {
		return err
	}
	if s.Pending != 0 || s.Waiting != 0 || s.Processing != 0 {
		return fmt.Errorf("the queue is not empty after the run: %+v", s)
	}
	return nil
}

// runThroughput sends b.N messages in batches of 10 from benchProducers
// goroutines while benchConsumers goroutines receive and delete them,
// and reports messages per second. Each message must be received and
// deleted once.
func runThroughput(b *testing.B, ops benchOps) {
	n := b.N
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		failOnce sync.Once
		failure  error
	)
	fail := func(err error) {
		failOnce.Do(func() { failure = err })
		cancel()
	}
	// slots holds a token per message sent and not yet deleted.
	slots := make(chan struct{}, benchBacklog)
	var (
		nextBatch atomic.Int64
		received  atomic.Int64
		deleted   atomic.Int64
		receives  atomic.Int64 // that returned messages
		backlog   atomic.Int64 // sum of the backlogs those receives' deletes saw
		seen      = make([]atomic.Int32, n)
		elapsed   time.Duration
		finished  = make(chan struct{})
	)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range benchProducers {
		wg.Go(func() {
			bodies := make([]string, 0, benchBatch)
			for {
				first := int(nextBatch.Add(1)-1) * benchBatch
				if first >= n {
					return
				}
				bodies = bodies[:0]
				for i := first; i < min(first+benchBatch, n); i++ {
					select {
					case slots <- struct{}{}:
					case <-ctx.Done():
						return
					}
					bodies = append(bodies, benchBody(i))
				}
				if err := ops.send(ctx, bodies); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	for range benchConsumers {
		wg.Go(func() {
			for ctx.Err() == nil {
				ms, err := ops.receive(ctx)
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				if len(ms) == 0 {
					continue
				}
				for _, m := range ms {
					i, err := benchNumber(m.body)
					if err != nil || i < 0 || i >= n {
						fail(fmt.Errorf("received message number %d of %d: %v", i, n, err))
						return
					}
					if seen[i].Add(1) != 1 {
						fail(fmt.Errorf("message %d was received twice", i))
						return
					}
				}
				receives.Add(1)
				received.Add(int64(len(ms)))
				if err := ops.delete(ctx, ms); err != nil {
					fail(err)
					return
				}
				backlog.Add(int64(len(slots)))
				for range ms {
					<-slots
				}
				if deleted.Add(int64(len(ms))) == int64(n) {
					elapsed = time.Since(start)
					close(finished)
					cancel() // ends the others' long polls
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	select {
	case <-finished:
	default:
		b.Fatalf("the consumers stopped with %d of %d messages deleted", deleted.Load(), n)
	}
	if r, d := received.Load(), deleted.Load(); r != int64(n) || d != int64(n) {
		b.Fatalf("%d messages sent, %d received, %d deleted", n, r, d)
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			b.Fatalf("message %d was received %d times", i, c)
		}
	}
	if err := ops.empty(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
	// Below 10 messages a receive, or a mean backlog not far above the
	// 320 messages that consumers hold, the producers did not keep up.
	b.ReportMetric(float64(n)/float64(receives.Load()), "msgs/receive")
	b.ReportMetric(float64(backlog.Load())/float64(receives.Load()), "backlog")
}

// BenchmarkSQSThroughput measures messages per second through the API:
// benchProducers goroutines send batches of 10 (SendMessageBatch) while
// benchConsumers goroutines each loop receiving up to 10 (ReceiveMessage,
// waiting up to 1 s) and deleting what they got (DeleteMessageBatch).
// One op is one message: a tenth of a send batch, of a receive and of a
// delete batch. Each of the b.N messages is sent, received and deleted
// once within the timed stretch; the benchmark fails otherwise.
func BenchmarkSQSThroughput(b *testing.B) {
	for _, bs := range backends() {
		b.Run(bs.name, func(b *testing.B) {
			c := benchServer(b, bs.open(b, nil))
			runThroughput(b, sqsOps{c: c, url: aws.String(benchQueue(b, c))})
		})
	}
}

// BenchmarkSQSThroughputOneGroup is BenchmarkSQSThroughput with one
// MessageGroupId on every message of the standard queue: a group orders
// nothing there, so it should run as fast.
func BenchmarkSQSThroughputOneGroup(b *testing.B) {
	for _, bs := range backends() {
		b.Run(bs.name, func(b *testing.B) {
			c := benchServer(b, bs.open(b, nil))
			runThroughput(b, sqsOps{c: c, url: aws.String(benchQueue(b, c)), group: aws.String("tenant")})
		})
	}
}

// BenchmarkSQSOneGroupFIFO is BenchmarkSQSThroughput on a FIFO queue
// whose messages are all of one group: a receive takes up to ten of the
// group, in order, and no other receive gets one until they are deleted,
// so that the consumers take turns. It measures what one ordered stream
// of messages can do.
func BenchmarkSQSOneGroupFIFO(b *testing.B) {
	for _, bs := range backends() {
		b.Run(bs.name, func(b *testing.B) {
			c := benchServer(b, bs.open(b, nil))
			out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("bench.fifo"),
				Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
			if err != nil {
				b.Fatal(err)
			}
			runThroughput(b, sqsOps{c: c, url: out.QueueUrl, group: aws.String("g")})
		})
	}
}

// BenchmarkSQSOneGroupFIFODrain measures a FIFO consumer alone: b.N
// messages of one group are sent first (not timed), then one consumer
// receives 10 at a time and deletes them in a batch until the queue is
// empty, checking that they come in send order. An op is one message
// received and deleted.
func BenchmarkSQSOneGroupFIFODrain(b *testing.B) {
	for _, bs := range backends() {
		b.Run(bs.name, func(b *testing.B) {
			c := benchServer(b, bs.open(b, nil))
			ctx := context.Background()
			out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("drain.fifo"),
				Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
			if err != nil {
				b.Fatal(err)
			}
			ops := sqsOps{c: c, url: out.QueueUrl, group: aws.String("g")}
			for first := 0; first < b.N; first += benchBatch {
				bodies := make([]string, 0, benchBatch)
				for i := first; i < min(first+benchBatch, b.N); i++ {
					bodies = append(bodies, benchBody(i))
				}
				if err := ops.send(ctx, bodies); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for next := 0; next < b.N; {
				ms, err := ops.receive(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range ms {
					if m.body != benchBody(next) {
						b.Fatalf("received %q where the group's next message is %q", m.body, benchBody(next))
					}
					next++
				}
				if len(ms) > 0 {
					if err := ops.delete(ctx, ms); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkStoreThroughputBatch10 is BenchmarkSQSThroughput without the
// API: the same goroutines and batches of 10 call the store as the API
// does, in this process. The difference is what HTTP, JSON, the SDK and
// the server cost.
func BenchmarkStoreThroughputBatch10(b *testing.B) {
	for _, bs := range backends() {
		b.Run(bs.name, func(b *testing.B) {
			st := bs.open(b, nil)
			mb := mailbox.New(mailbox.Config{Store: st, Queue: "bench", WorkerID: mailbox.NewWorkerID(), PollInterval: mailbox.DefaultPollInterval,
				Clock: clock.System()})
			runThroughput(b, storeOps{st: st, queue: "bench", mb: mb})
		})
	}
}

// BenchmarkSQSRoundTrip measures one message's round trip with one
// client and nothing else running: SendMessage, ReceiveMessage (waiting
// up to 1 s) of that message, DeleteMessage. An op is a round trip; p50
// and p99 are of the round trips' durations.
func BenchmarkSQSRoundTrip(b *testing.B) {
	for _, bs := range backends() {
		b.Run(bs.name, func(b *testing.B) {
			c := benchServer(b, bs.open(b, nil))
			url := aws.String(benchQueue(b, c))
			ctx := context.Background()
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				body := benchBody(i)
				if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(body)}); err != nil {
					b.Fatal(err)
				}
				out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
				if err != nil {
					b.Fatal(err)
				}
				if len(out.Messages) != 1 || *out.Messages[0].Body != body {
					b.Fatalf("round trip %d: received %d messages, not the one sent", i, len(out.Messages))
				}
				if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
					b.Fatal(err)
				}
				durations = append(durations, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(durations)
			ms := func(q float64) float64 {
				return float64(durations[min(len(durations)-1, int(q*float64(len(durations))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(ms(0.50), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
		})
	}
}
