package serve_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/serve"
)

type receiveResult struct {
	out *sqs.ReceiveMessageOutput
	err error
}

// longPoll starts a receive that waits up to wait seconds.
func (f *fixture) longPoll(url string, wait int32) <-chan receiveResult {
	done := make(chan receiveResult, 1)
	go func() {
		out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: wait, MaxNumberOfMessages: 10})
		done <- receiveResult{out, err}
	}()
	return done
}

func TestLongPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := setup(t, b, options{})
		url := f.createQueue("poll", nil)

		// A send wakes a waiting receive at once: the fake clock does not
		// move, so only the wakeup can end the wait.
		done := f.longPoll(url, 20)
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.send(url, "wake", "")
		r := <-done
		if r.err != nil || len(r.out.Messages) != 1 || *r.out.Messages[0].Body != "wake" {
			t.Fatalf("long poll = %+v, %v", r.out, r.err)
		}

		// An empty wait returns empty when the wait has passed, not before.
		done = f.longPoll(url, 2)
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("the long poll returned before its wait: %+v, %v", r.out, r.err)
		default:
		}
		f.clk.Advance(2 * time.Second)
		r = <-done
		if r.err != nil || len(r.out.Messages) != 0 {
			t.Fatalf("empty long poll = %+v, %v", r.out, r.err)
		}

		// The queue's ReceiveMessageWaitTimeSeconds is the default wait.
		if _, err := f.c.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
			Attributes: map[string]string{"ReceiveMessageWaitTimeSeconds": "5"}}); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Second) // past the cache of the queue's settings
		queueWait := make(chan receiveResult, 1)
		go func() {
			out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)})
			queueWait <- receiveResult{out, err}
		}()
		if err := f.clk.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.send(url, "default wait", "")
		if r := <-queueWait; r.err != nil || len(r.out.Messages) != 1 {
			t.Fatalf("receive with the queue's wait = %+v, %v", r.out, r.err)
		}
	})
}

// running starts the server's Run on a real listener and returns a
// fixture whose client talks to it.
func running(t *testing.T, b backend) (*fixture, chan error) {
	f := setup(t, b, options{})
	srv, err := serve.New(serve.Config{Store: f.st, Addr: "127.0.0.1:0", Clock: f.clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	f.srv, f.url = srv, "http://"+srv.Addr()
	f.c = f.client("", "")
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(context.Background()) }()
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
	})
	return f, ran
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestMetricsAndHealth(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f, _ := running(t, b)
		url := f.createQueue("observed", nil)
		f.send(url, "m", "")
		_, err := f.c.GetQueueUrl(f.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
		wantCode(t, "GetQueueUrl", err, "AWS.SimpleQueueService.NonExistentQueue")

		code, body := get(t, f.url+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		for _, want := range [][]string{
			{"leasehold_sqs_requests_total{", `action="SendMessage"`, `outcome="ok"`, "} 1"},
			{"leasehold_sqs_requests_total{", `action="GetQueueUrl"`, `outcome="AWS.SimpleQueueService.NonExistentQueue"`, "} 1"},
			{"leasehold_sqs_request_duration_seconds_count{", `action="CreateQueue"`, "} 1"},
			{"leasehold_queue_depth{", `queue="observed"`, `state="pending"`, "} 1"},
		} {
			if !hasSample(body, want) {
				t.Errorf("/metrics has no line with %q", want)
			}
		}
		if code, body := get(t, f.url+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
			t.Fatalf("/healthz: %d %s", code, body)
		}
		if code, body := get(t, f.url+"/readyz"); code != 200 {
			t.Fatalf("/readyz: %d %s", code, body)
		}
		f.st.Close()
		f.clk.Advance(time.Second) // past the last answer's second
		if code, _ := get(t, f.url+"/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz with the store closed: %d, want 503", code)
		}
		if code, _ := get(t, f.url+"/healthz"); code != 200 {
			t.Fatalf("/healthz with the store closed: %d, want 200", code)
		}
	})
}

func TestShutdownEndsLongPolls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f, ran := running(t, b)
		url := f.createQueue("draining", nil)
		// The upkeep's four tickers (maintainer, reaper, cleaner, the
		// throughput's pruning), then the long poll's timer.
		if err := f.clk.BlockUntil(f.ctx, 4); err != nil {
			t.Fatal(err)
		}
		done := f.longPoll(url, 20)
		if err := f.clk.BlockUntil(f.ctx, 5); err != nil {
			t.Fatal(err)
		}
		if err := f.srv.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		r := <-done
		if r.err != nil || len(r.out.Messages) != 0 {
			t.Fatalf("the long poll during shutdown = %+v, %v", r.out, r.err)
		}
		if err := <-ran; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if _, err := http.Get(f.url + "/healthz"); err == nil {
			t.Fatal("the server still answers after Shutdown")
		}
	})
}

// hasSample reports whether a line of a Prometheus text page starts with
// parts[0] and holds every other part.
func hasSample(page string, parts []string) bool {
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, parts[0]) {
			continue
		}
		all := true
		for _, p := range parts[1:] {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// Without credentials, a request must name this machine in its Host: a
// page elsewhere cannot reach the server through a name of its own.
func TestUnsignedServerAnswersLocalHostsOnly(t *testing.T) {
	f := setup(t, backends()[0], options{})
	for host, want := range map[string]int{"evil.example": 421, "evil.example:9324": 421, "localhost:9324": 200, "127.0.0.1": 200, "[::1]:9324": 200} {
		req, _ := http.NewRequest(http.MethodGet, f.url+"/healthz", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /healthz with Host %s = %d, want %d", host, resp.StatusCode, want)
		}
	}
}
