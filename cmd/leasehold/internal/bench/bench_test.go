package bench_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/bench"
	"github.com/leasehold/leasehold/store/memory"
)

// A burn-down handles every message it enqueued, once, and leaves no
// queue behind.
func TestBurnDown(t *testing.T) {
	for name, keys := range map[string]int{"unkeyed": 0, "keyed": 7} {
		t.Run(name, func(t *testing.T) {
			st, err := memory.New(memory.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			res, err := bench.Run(ctx, st, bench.Config{Messages: 3000, Workers: 2, Concurrency: 10, Payload: 16, Keys: keys,
				Lease: 30 * time.Second, Duration: time.Hour}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages != 3000 || res.Errors != 0 || res.Mode != "burn-down" || res.MessagesPerSecond <= 0 {
				t.Fatalf("result %+v, want 3000 messages and no errors", res)
			}
			if qs, err := st.Queues(ctx); err != nil || len(qs) != 0 {
				t.Fatalf("queues left: %v, %v", qs, err)
			}
		})
	}
}
