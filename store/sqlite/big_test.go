package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/store/sqlite"
	"github.com/leasehold/leasehold/store/storetest"
)

// TestBrowsingBigHistory times a dashboard's reads on a queue with
// 1,000,000 completed messages and a few hundred live ones. Run with
// LEASEHOLD_BIG=1 and -v to see the figures.
func TestBrowsingBigHistory(t *testing.T) {
	storetest.SkipUnlessBig(t)
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "big.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Written with SQL for speed, as storetest.BigHistory describes it;
	// the completed count is kept by its trigger.
	if _, err := s.DB().Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
		INSERT INTO leasehold_messages (queue, key, kind, payload, state, deliveries, max_deliveries, fencing_token,
			enqueued_at, visible_at, locked_until, finished_at)
		SELECT 'big', CASE WHEN i % 2 = 0 THEN 'k' || (i % 5000) END, 'email', zeroblob(100), 3, 1, 5, i, i, i, i + 1, i + 2 FROM n`,
		storetest.BigHistory); err != nil {
		t.Fatal(err)
	}
	storetest.MeasureBrowsing(t, s, "big")
}
