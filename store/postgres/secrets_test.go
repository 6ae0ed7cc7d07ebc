package postgres_test

import (
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/storetest"
)

// Stores on pools of their own, as two servers would be.
func TestServerSecretSharedByStoresOfASchema(t *testing.T) {
	schema := pgtest.Schema(t, pgtest.Pool(t))
	storetest.CheckSecretShared(t, func() store.Store { return openLive(t, pgtest.Pool(t), schema) })
}

// A session whose transactions are read-only, as on a standby, refuses
// writes.
func TestCheckWriteOnAReadOnlySession(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	storetest.CheckReadOnly(t, openLive(t, pool, schema), openLive(t, pgtest.ReadOnlyPool(t), schema))
}
