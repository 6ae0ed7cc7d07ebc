package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/storetest"
)

// openOn opens the store of a schema on pool, closed when the test ends.
func openOn(t *testing.T, pool *pgxpool.Pool, schema string) store.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Stores on pools of their own, as two servers would be.
func TestServerSecretSharedByStoresOfASchema(t *testing.T) {
	schema := pgtest.Schema(t, pgtest.Pool(t))
	storetest.CheckSecretShared(t, func() store.Store { return openOn(t, pgtest.Pool(t), schema) })
}

// A session whose transactions are read-only, as on a standby, refuses
// writes.
func TestCheckWriteOnAReadOnlySession(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	storetest.CheckReadOnly(t, openOn(t, pool, schema), openOn(t, pgtest.ReadOnlyPool(t), schema))
}
