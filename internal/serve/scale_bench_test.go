package serve_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/serve"
)

// BenchmarkManyQueues times, on each backend with 20,000 queues of one
// pending message each, a scrape of /metrics, the queues page, its
// JSON, and the lookup of a queue that does not exist; and the store's
// listing and counting of every queue, which they use.
func BenchmarkManyQueues(b *testing.B) {
	const queues = 20_000
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b, nil)
			fill(b, st, queues)
			srv, err := serve.New(serve.Config{Store: st, Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			for _, path := range []string{"/metrics", "/", "/api/queues"} {
				b.Run(path, func(b *testing.B) {
					size := 0
					for b.Loop() {
						resp, err := http.Get(hs.URL + path)
						if err != nil {
							b.Fatal(err)
						}
						n, _ := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Fatalf("GET %s: %d", path, resp.StatusCode)
						}
						size = int(n)
					}
					b.ReportMetric(float64(size), "bytes/op")
				})
			}
			b.Run("store Queues", func(b *testing.B) {
				for b.Loop() {
					if _, err := st.Queues(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("store AllStats", func(b *testing.B) {
				for b.Loop() {
					if _, err := st.AllStats(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("missing queue", func(b *testing.B) {
				c := (&fixture{url: hs.URL}).client("", "")
				for b.Loop() {
					if _, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("missing")}); err == nil {
						b.Fatal("found a missing queue")
					}
				}
			})
		})
	}
}
