package leasehold_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// backends are the stores a client test runs on, each opened fresh for the
// test and closed when it ends; PostgreSQL's is skipped without
// LEASEHOLD_TEST_POSTGRES_DSN.
var backends = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"memory", func(t *testing.T) store.Store { return memoryStore(t) }},
	{"sqlite", func(t *testing.T) store.Store {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "client.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"postgres", func(t *testing.T) store.Store {
		pool := pgtest.Pool(t)
		st, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

// onEachBackend runs test once per backend, each as a subtest.
func onEachBackend(t *testing.T, test func(t *testing.T, st store.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.open(t)) })
	}
}

// clientOf returns a client of st with cfg, quiet.
func clientOf(t testing.TB, st store.Store, cfg leasehold.Config) *leasehold.Client[store.NoTx] {
	t.Helper()
	cfg.Logger = quiet()
	c, err := leasehold.NewClient(store.WithoutTx(st), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
