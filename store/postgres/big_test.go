package postgres_test

import (
	"context"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store/storetest"
)

// TestBrowsingBigHistory times a dashboard's reads on a queue with
// 1,000,000 completed messages and a few hundred live ones. Run with
// LEASEHOLD_BIG=1 and -v to see the figures.
func TestBrowsingBigHistory(t *testing.T) {
	storetest.SkipUnlessBig(t)
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s := openLive(t, pool, schema)
	// Written with SQL for speed, as storetest.BigHistory describes it,
	// with the count that completions would have kept, then vacuumed and
	// analyzed as autovacuum would.
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.messages
		(queue, key, kind, payload, state, deliveries, max_deliveries, fencing_token, enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'big', CASE WHEN i % 2 = 0 THEN 'k' || (i % 5000) END, 'email', '\x00', 3, 1, 5, i, now(), now(), now(), now()
		FROM generate_series(1, $1::int) AS i`, storetest.BigHistory); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.completed_counts (queue, shard, n) VALUES ('big', 0, $1)`, storetest.BigHistory); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE `+schema+`.messages`); err != nil {
		t.Fatal(err)
	}
	storetest.MeasureBrowsing(t, s, "big")
}
