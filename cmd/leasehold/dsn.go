package main

import (
	"context"
	"fmt"
	"net/url"
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
	// synchronous is the SQLite synchronous setting; empty for the
	// default, full.
	synchronous string
	// schema is the PostgreSQL schema of leasehold's tables.
	schema string
}

// schemaOf checks the schema a command was given (--schema or
// LEASEHOLD_SCHEMA; empty for none) for the database d names, and gives
// the schema to use: PostgreSQL's default when none is given. Only a
// PostgreSQL database has schemas.
func schemaOf(d dsn, schema string) (string, error) {
	if d.postgres == "" {
		if schema != "" {
			return "", fmt.Errorf("--schema %q: only a PostgreSQL database has schemas, and --db names the %s", schema, d)
		}
		return "", nil
	}
	if schema == "" {
		return postgres.DefaultSchema, nil
	}
	if err := postgres.CheckSchema(schema); err != nil {
		return "", fmt.Errorf("--schema: %w", err)
	}
	return schema, nil
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

// parseDSN reads a --db value: empty for the default SQLite file, a path
// or sqlite:PATH, either with ?synchronous=full|normal, a postgres:// (or
// postgresql://) URL, a libpq keyword/value string ("host=db dbname=app"),
// or "memory:" for an in-memory store that lives as long as the command
// (bench only). A SQLite path is taken as it is: no percent-decoding.
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
	case keywordDSN(s):
		if _, err := pgxpool.ParseConfig(s); err != nil {
			return dsn{}, fmt.Errorf("--db: malformed PostgreSQL keyword/value string: %v", err)
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

// keywordDSN reports whether s reads as libpq's keyword/value form: a
// keyword=value pair and white space, or one pair of a connection keyword.
func keywordDSN(s string) bool {
	key, _, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return false
	}
	if strings.ContainsAny(s, " \t\n") {
		return true
	}
	switch strings.TrimSpace(key) {
	case "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service", "sslmode", "connect_timeout":
		return true
	}
	return false
}

func sqlitePath(p string) (dsn, error) {
	path, opts, _ := strings.Cut(p, "?")
	d := dsn{path: path}
	switch {
	case path == "":
		return dsn{}, fmt.Errorf("--db: sqlite: needs a file path")
	case strings.ContainsRune(p, 0):
		return dsn{}, fmt.Errorf("--db: SQLite path %q must not contain NUL", p)
	}
	if opts == "" {
		return d, nil
	}
	q, err := url.ParseQuery(opts)
	if err != nil {
		return dsn{}, fmt.Errorf("--db: SQLite options %q: %v", opts, err)
	}
	for k, v := range q {
		switch {
		case k != "synchronous":
			return dsn{}, fmt.Errorf("--db: unknown SQLite option %q: the only one is synchronous=full|normal", k)
		case len(v) != 1 || (v[0] != "full" && v[0] != "normal"):
			return dsn{}, fmt.Errorf("--db: synchronous=%s: want full or normal", strings.Join(v, ","))
		}
		d.synchronous = q.Get(k)
	}
	return d, nil
}

// openStore opens the database. A SQLite file is created and migrated
// with openCreate; otherwise one without leasehold's tables is refused
// and left as it was. A PostgreSQL database must have been migrated.
func openStore(ctx context.Context, d dsn, mode openMode) (store.Store, error) {
	if d.memory {
		return memory.New(memory.Config{})
	}
	if d.postgres != "" {
		return postgres.Open(ctx, postgres.Config{DSN: d.postgres, Schema: d.schema})
	}
	return sqlite.Open(ctx, sqlite.Config{Path: d.path, Synchronous: d.synchronous,
		ReadOnly: mode == openReadOnly, NoCreate: mode == openExisting})
}
