package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/storetest"
)

func openBench(b *testing.B) (*postgres.Store, string) {
	b.Helper()
	pool := pgtest.Pool(b)
	schema := pgtest.Schema(b, pool)
	s, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, schema
}

func BenchmarkEndToEnd(b *testing.B) {
	s, _ := openBench(b)
	storetest.BenchmarkEndToEnd(b, s, "bench")
}

func BenchmarkEndToEndParallel(b *testing.B) {
	for _, workers := range []int{4, 8, 16} {
		b.Run(fmt.Sprint("workers=", workers), func(b *testing.B) {
			s, _ := openBench(b)
			storetest.BenchmarkEndToEndParallel(b, s, "bench", workers)
		})
	}
}

// BenchmarkClaim compares claims on an empty table with claims on a table
// holding 1,000,000 completed (and 10,000 dead) rows of the same queue.
func BenchmarkClaim(b *testing.B) {
	b.Run("empty", func(b *testing.B) {
		s, _ := openBench(b)
		storetest.BenchmarkClaim(b, s, "bench")
	})
	b.Run("1M-completed", func(b *testing.B) {
		s, schema := openBench(b)
		_, err := s.Pool().Exec(context.Background(), `INSERT INTO `+schema+`.messages
			(queue, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
			SELECT 'bench', '\x00', CASE WHEN i <= 1000000 THEN 3 ELSE 4 END, 1, 5, i, now(), now(), now(), now()
			FROM generate_series(1, 1010000) AS i`)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Pool().Exec(context.Background(), `VACUUM ANALYZE `+schema+`.messages`); err != nil {
			b.Fatal(err)
		}
		storetest.BenchmarkClaim(b, s, "bench")
	})
}
