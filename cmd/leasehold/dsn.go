package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// defaultDB is the SQLite file used when no database is named.
const defaultDB = "leasehold.db"

// dsn names a database.
type dsn struct {
	// memory is an in-memory store that lives as long as the command.
	memory bool
	// postgres is the URL of a PostgreSQL database; empty for SQLite.
	postgres string
	// path is the SQLite file.
	path string
}

func (d dsn) String() string {
	if d.memory {
		return "memory"
	}
	if d.postgres != "" {
		return "postgres database"
	}
	return "sqlite:" + d.path
}

// parseDSN reads a --db value: empty for the default SQLite file, a path,
// sqlite:PATH, a postgres:// (or postgresql://) URL, or "memory:" for an
// in-memory store that lives as long as the command (bench only).
func parseDSN(s string) (dsn, error) {
	switch {
	case s == "":
		return dsn{path: defaultDB}, nil
	case s == "memory:":
		return dsn{memory: true}, nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		if _, err := pgxpool.ParseConfig(s); err != nil {
			return dsn{}, fmt.Errorf("--db: malformed PostgreSQL URL: %v", err)
		}
		return dsn{postgres: s}, nil
	case strings.HasPrefix(s, "sqlite:"):
		return sqlitePath(strings.TrimPrefix(s, "sqlite:"))
	case strings.Contains(s, "://"):
		scheme, _, _ := strings.Cut(s, "://")
		return dsn{}, fmt.Errorf("--db: unknown database kind %q: want a SQLite file path, sqlite:PATH or a postgres:// URL", scheme)
	default:
		return sqlitePath(s)
	}
}

func sqlitePath(p string) (dsn, error) {
	switch {
	case p == "":
		return dsn{}, fmt.Errorf("--db: sqlite: needs a file path")
	case strings.ContainsAny(p, "?#\x00"):
		return dsn{}, fmt.Errorf("--db: SQLite path %q must not contain '?', '#' or NUL", p)
	}
	return dsn{path: p}, nil
}

// openStore opens the database. A SQLite file is created and migrated; a
// PostgreSQL database must have been migrated.
func openStore(ctx context.Context, d dsn) (store.Store, error) {
	if d.memory {
		return memory.New(memory.Config{})
	}
	if d.postgres != "" {
		return postgres.Open(ctx, postgres.Config{DSN: d.postgres})
	}
	return sqlite.Open(ctx, sqlite.Config{Path: d.path})
}
