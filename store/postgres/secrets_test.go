package postgres_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store/postgres"
)

// Stores on separate pools of one schema, as two servers would be, that
// ask for a secret at once get the same one, and so does a store opened
// later.
func TestServerSecretSharedByStoresOfASchema(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	openOn := func() *postgres.Store {
		p, err := pgxpool.New(ctx, pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		s, err := postgres.Open(ctx, postgres.Config{Pool: p, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := openOn(), openOn()
	var sa, sb []byte
	var ea, eb error
	var wg sync.WaitGroup
	wg.Go(func() { sa, ea = a.ServerSecret(ctx, "serve") })
	wg.Go(func() { sb, eb = b.ServerSecret(ctx, "serve") })
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatal(ea, eb)
	}
	if !bytes.Equal(sa, sb) || len(sa) != 32 {
		t.Fatalf("two stores of one schema got %x and %x", sa, sb)
	}
	if sc, err := openOn().ServerSecret(ctx, "serve"); err != nil || !bytes.Equal(sc, sa) {
		t.Fatalf("a store opened later: %x, %v; want %x", sc, err, sa)
	}
}

// CheckWrite fails in a session whose transactions are read-only, as on a
// standby, while Ping and the reading of a secret that exists still
// answer.
func TestCheckWriteOnAReadOnlySession(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	rw, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	secret, err := rw.ServerSecret(ctx, "serve")
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(ctx, postgres.Config{Pool: pgtest.ReadOnlyPool(t), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping in a read-only session: %v", err)
	}
	if err := s.CheckWrite(ctx); err == nil {
		t.Fatal("CheckWrite passed in a read-only session")
	}
	if got, err := s.ServerSecret(ctx, "serve"); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("ServerSecret in a read-only session: %x, %v; want %x", got, err, secret)
	}
	if err := rw.CheckWrite(ctx); err != nil {
		t.Fatalf("CheckWrite in a writable session: %v", err)
	}
}
