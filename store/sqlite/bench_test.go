package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
	"github.com/leasehold/leasehold/store/storetest"
)

func openBench(b *testing.B) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkEndToEnd(b *testing.B) {
	storetest.BenchmarkEndToEnd(b, openBench(b), "bench")
}

// BenchmarkClaim compares claims on an empty table with claims on a table
// holding 1,000,000 completed rows (and 10,000 dead ones) of the same queue.
func BenchmarkClaim(b *testing.B) {
	b.Run("empty", func(b *testing.B) {
		storetest.BenchmarkClaim(b, openBench(b), "bench")
	})
	b.Run("1M-completed", func(b *testing.B) {
		s := openBench(b)
		// Written with SQL for speed: a million rows through the API would
		// take most of a minute.
		_, err := s.DB().Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1010000)
			INSERT INTO leasehold_messages (queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
			SELECT 'bench', zeroblob(100), CASE WHEN i <= 1000000 THEN 3 ELSE 4 END, 1, 5, i, i, i, i + 1, i + 2 FROM n`)
		if err != nil {
			b.Fatal(err)
		}
		storetest.BenchmarkClaim(b, s, "bench")
	})
}

// BenchmarkConcurrentEnqueue measures single-message enqueues from 32
// concurrent callers (16 per core on 2 cores), as many request handlers
// would make them: what gathering them into shared commits is for.
func BenchmarkConcurrentEnqueue(b *testing.B) {
	s := openBench(b)
	msg := []store.NewMessage{{Queue: "bench", Payload: make([]byte, 100)}}
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Enqueue(context.Background(), msg); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
