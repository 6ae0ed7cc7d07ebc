// Package pgtest gives tests a PostgreSQL schema of their own. The server is
// named by LEASEHOLD_TEST_POSTGRES_DSN: unset, the tests skip; set but
// unreachable, they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/store/postgres"
)

// EnvDSN is the variable that names the test server.
const EnvDSN = "LEASEHOLD_TEST_POSTGRES_DSN"

// DSN returns the test server's DSN, or skips the test when it is unset.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		t.Skipf("%s is not set", EnvDSN)
	}
	return dsn
}

// Pool returns a pool on the test server, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), DSN(t))
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvDSN, err)
	}
	if err := pool.Ping(context.Background()); err != nil {
		pool.Close()
		t.Fatalf("reach PostgreSQL named by %s: %v", EnvDSN, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ReadOnlyPool returns a pool on the test server whose sessions start every
// transaction read-only (default_transaction_read_only), as a standby's
// do, closed when the test ends.
func ReadOnlyPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(DSN(t))
	if err != nil {
		t.Fatalf("parse %s: %v", EnvDSN, err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvDSN, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Schema creates a migrated schema with a random name, dropped when the
// test ends, and returns its name.
func Schema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "lh_test_" + hex.EncodeToString(b[:])
	if err := postgres.Migrate(context.Background(), pool, name); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}
