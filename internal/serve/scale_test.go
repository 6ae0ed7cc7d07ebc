package serve_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/store"
)

// scaleServer is a server of st with cfg's MaxQueues, served by httptest,
// and an unsigned SDK client of it.
func scaleServer(t *testing.T, st store.Store, clk *clocktest.Clock, maxQueues int) (string, *sqs.Client) {
	t.Helper()
	srv, err := serve.New(serve.Config{Store: st, Addr: "127.0.0.1:0", Clock: clk, Logger: slog.New(slog.DiscardHandler), MaxQueues: maxQueues})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	f := &fixture{url: hs.URL}
	return hs.URL, f.client("", "")
}

// fill gives each of n queues one pending message.
func fill(t testing.TB, st store.Store, n int) {
	t.Helper()
	msgs := make([]store.NewMessage, n)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: fmt.Sprintf("q%05d", i)}
	}
	for len(msgs) > 0 {
		batch := msgs[:min(len(msgs), store.MaxBatch)]
		if _, err := st.Enqueue(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[len(batch):]
	}
}

// /metrics exports the depth of every queue, far past the 333 queues
// (2,000 series of six states) that OpenTelemetry keeps by default.
func TestMetricsExportEveryQueue(t *testing.T) {
	const queues = 3000
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New()
		st := b.open(t, clk)
		fill(t, st, queues)
		url, _ := scaleServer(t, st, clk, 0)
		code, body := get(t, url+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		seen := map[string]bool{}
		for line := range strings.Lines(body) {
			if strings.HasPrefix(line, "leasehold_queue_depth{") && strings.Contains(line, `state="pending"`) && strings.HasSuffix(line, "} 1\n") {
				_, rest, _ := strings.Cut(line, `queue="`)
				q, _, _ := strings.Cut(rest, `"`)
				seen[q] = true
			}
		}
		if len(seen) != queues {
			t.Fatalf("/metrics has the pending depth of %d queues, want %d", len(seen), queues)
		}
		if strings.Contains(body, "otel_metric_overflow") {
			t.Fatalf("/metrics folded series into the overflow series")
		}
	})
}

// A server without queues serves every metric it has: the queues'
// families, empty, are left out rather than end the text there.
func TestMetricsWithoutQueues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New()
		url, _ := scaleServer(t, b.open(t, clk), clk, 0)
		code, body := get(t, url+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		for _, want := range []string{"go_goroutines", "process_open_fds", "target_info"} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics of a server without queues lacks %s:\n%s", want, body[max(0, len(body)-2000):])
			}
		}
	})
}

// CreateQueue past MaxQueues is refused with SQS's OverLimit (HTTP 403)
// and creates nothing; a queue that exists is still returned, a queue
// that programs made by sending counts, and deleting a queue makes room.
func TestCreateQueueOverLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New()
		st := b.open(t, clk)
		ctx := context.Background()
		_, c := scaleServer(t, st, clk, 3)
		if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "sent"}}); err != nil {
			t.Fatal(err)
		}
		var urls []string
		for _, q := range []string{"a", "b"} {
			out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q)})
			if err != nil {
				t.Fatalf("CreateQueue %s: %v", q, err)
			}
			urls = append(urls, *out.QueueUrl)
		}
		_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("c")})
		var over *types.OverLimit
		if !errors.As(err, &over) {
			t.Fatalf("CreateQueue of a fourth queue: %v, want OverLimit", err)
		}
		wantCode(t, "CreateQueue", err, "OverLimit")
		if _, err := st.QueueInfo(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused queue has a record: %v", err)
		}
		for _, q := range []string{"a", "sent"} {
			if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q)}); err != nil {
				t.Fatalf("CreateQueue of %s, which exists, at the limit: %v", q, err)
			}
		}
		if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(urls[1])}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("c")}); err != nil {
			t.Fatalf("CreateQueue once a queue was deleted: %v", err)
		}
	})
}

// countingStore counts the listings of every queue.
type countingStore struct {
	store.Store
	lists atomic.Int64
}

func (s *countingStore) Queues(ctx context.Context) ([]string, error) {
	s.lists.Add(1)
	return s.Store.Queues(ctx)
}

// Looking up a queue, missing or held by a program without a record,
// reads that queue alone: never a list of every queue.
func TestLookupReadsOneQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New()
		st := &countingStore{Store: b.open(t, clk)}
		ctx := context.Background()
		fill(t, st, 50)
		if err := st.Pause(ctx, "paused"); err != nil {
			t.Fatal(err)
		}
		_, c := scaleServer(t, st, clk, 0)
		for _, q := range []string{"missing", "q0000", ".."} {
			_, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
			wantCode(t, "GetQueueUrl "+q, err, "AWS.SimpleQueueService.NonExistentQueue")
		}
		for _, q := range []string{"q00042", "paused"} {
			if _, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)}); err != nil {
				t.Fatalf("GetQueueUrl of %s, which a program made: %v", q, err)
			}
			if _, err := st.QueueInfo(ctx, q); err != nil {
				t.Fatalf("%s was not recorded: %v", q, err)
			}
		}
		if n := st.lists.Load(); n != 0 {
			t.Fatalf("the lookups listed every queue %d times", n)
		}
	})
}

// ListQueues without a prefix pages through every queue.
func TestListQueuesPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New()
		st := b.open(t, clk)
		fill(t, st, 5)
		_, c := scaleServer(t, st, clk, 0)
		var got []string
		var token *string
		for range 5 {
			out, err := c.ListQueues(context.Background(), &sqs.ListQueuesInput{MaxResults: aws.Int32(2), NextToken: token})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range out.QueueUrls {
				got = append(got, u[strings.LastIndexByte(u, '/')+1:])
			}
			if token = out.NextToken; token == nil {
				break
			}
		}
		if want := []string{"q00000", "q00001", "q00002", "q00003", "q00004"}; !slices.Equal(got, want) || token != nil {
			t.Fatalf("ListQueues pages = %v (token %v), want %v", got, token, want)
		}
	})
}

// Creating queues lists every queue once a cache period, not once a
// create; a queue that another process deletes makes room once the
// period has passed.
func TestCreateQueueCountsOncePerPeriod(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New()
		st := &countingStore{Store: b.open(t, clk)}
		ctx := context.Background()
		_, c := scaleServer(t, st, clk, 10)
		for i := range 10 {
			if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("q%d", i))}); err != nil {
				t.Fatalf("CreateQueue %d: %v", i, err)
			}
		}
		if n := st.lists.Load(); n != 1 {
			t.Fatalf("ten creates listed every queue %d times, want once", n)
		}
		_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("more")})
		wantCode(t, "CreateQueue past the limit", err, "OverLimit")
		if _, err := st.DeleteQueue(ctx, "q3"); err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("more")})
		wantCode(t, "CreateQueue before the count is read again", err, "OverLimit")
		clk.Advance(2 * time.Second)
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("more")}); err != nil {
			t.Fatalf("CreateQueue once another process deleted a queue: %v", err)
		}
	})
}
