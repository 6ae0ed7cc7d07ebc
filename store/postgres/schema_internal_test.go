package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/store/storetest"
)

// emptySchema returns a pool on the test server and the name of a schema
// that does not exist yet, dropped when the test ends. (internal/pgtest
// imports this package, so these tests read its variable themselves.)
func emptySchema(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := os.Getenv("LEASEHOLD_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("LEASEHOLD_TEST_POSTGRES_DSN is not set")
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "lh_internal_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		pool.Close()
	})
	return pool, schema
}

// A schema migrated by the previous version upgrades in place, its
// completed messages counted.
func TestUpgradeCountsCompletedMessages(t *testing.T) {
	ctx := context.Background()
	pool, schema := emptySchema(t)
	// The previous version's schema, holding messages.
	if _, err := pool.Exec(ctx, expand(`CREATE SCHEMA {s}; CREATE TABLE {s}.schema_version (version integer NOT NULL);
		INSERT INTO {s}.schema_version VALUES (1)`, schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, expand(migrations[0], schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, expand(`INSERT INTO {s}.messages (queue, payload, state, max_deliveries, enqueued_at, visible_at, finished_at)
		VALUES ('a', '\x00', 3, 5, now(), now(), now()), ('a', '\x00', 3, 5, now(), now(), now()),
			('a', '\x00', 0, 5, now(), now(), NULL), ('b', '\x00', 3, 5, now(), now(), now())`, schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Config{Pool: pool, Schema: schema}); err == nil {
		t.Fatal("Open of an old schema succeeded")
	}
	if err := Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckUpgraded(t, s)
}

// Counting a queue's messages reads the live states' partial indexes and
// the completed counts, not the completed rows, however many there are.
func TestStatsPlanReadsNoHistory(t *testing.T) {
	ctx := context.Background()
	pool, schema := emptySchema(t)
	if err := Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, expand(`INSERT INTO {s}.messages (queue, payload, state, max_deliveries, enqueued_at, visible_at, finished_at)
		SELECT 'q', '\x00', 3, 5, now(), now(), now() FROM generate_series(1, 200000);
		INSERT INTO {s}.messages (queue, payload, state, max_deliveries, enqueued_at, visible_at)
		SELECT 'q', '\x00', s, 5, now(), now() FROM generate_series(0, 4) s WHERE s <> 3;
		ANALYZE {s}.messages`, schema)); err != nil {
		t.Fatal(err)
	}
	st, err := loadQueries(schema)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "EXPLAIN "+st.Text(qStats), nil, "q")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	for _, bad := range []string{"Seq Scan on messages", "messages_completed", "messages_pkey"} {
		if strings.Contains(text, bad) {
			t.Fatalf("the stats plan reads completed rows (%s):\n%s", bad, text)
		}
	}
}
