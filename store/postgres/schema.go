package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// DefaultSchema is the schema leasehold's tables live in by default.
const DefaultSchema = "leasehold"

// Schema names are at most 53 bytes so that the notification channel,
// "leasehold_" and the name, fits PostgreSQL's 63-byte identifiers.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,52}$`)

// CheckSchema validates a schema name: lower-case letters, digits and
// underscores, starting with a letter or underscore, at most 53 bytes.
func CheckSchema(name string) error {
	if !schemaName.MatchString(name) {
		return fmt.Errorf("%w: schema name %q must be 1 to 53 lower-case letters, digits or underscores, not starting with a digit", store.ErrInvalid, name)
	}
	return nil
}

// migrationFiles are applied in order of their names; a database records
// the count it has applied. {s} stands for the quoted schema name.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = storecore.Migrations(migrationFiles)

// SchemaVersion is the schema version this code writes.
var SchemaVersion = len(migrations)

func quoteSchema(schema string) string { return pgx.Identifier{schema}.Sanitize() }

func expand(sql, schema string) string {
	return sqlstate.Expand(strings.ReplaceAll(sql, "{s}", quoteSchema(schema)))
}

// Migrate creates or upgrades leasehold's tables in schema. It is safe to run
// from several processes at once: they take turns on an advisory lock. It
// refuses a schema written by a newer leasehold with store.ErrSchemaTooNew.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if err := CheckSchema(schema); err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres store: migrate: %w", briefConnectError(err))
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('leasehold migrate ' || $1, 0))`, schema); err != nil {
		return fmt.Errorf("postgres store: migrate: lock: %w", err)
	}
	// CREATE SCHEMA needs the right to create schemas in the database even
	// when the schema exists, so a role that owns only its schema would be
	// refused: create it only when it is missing.
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return fmt.Errorf("postgres store: migrate: %w", err)
	}
	if !exists {
		if _, err := tx.Exec(ctx, expand(`CREATE SCHEMA {s}`, schema)); err != nil {
			return fmt.Errorf("postgres store: migrate: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, expand(`CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer NOT NULL)`, schema)); err != nil {
		return fmt.Errorf("postgres store: migrate: %w", err)
	}
	v, err := readVersion(ctx, tx, schema)
	if err != nil {
		return err
	}
	if v > len(migrations) {
		return tooNew(schema, v)
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.Exec(ctx, expand(migrations[i], schema)); err != nil {
			return fmt.Errorf("postgres store: migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.Exec(ctx, expand(`DELETE FROM {s}.schema_version; INSERT INTO {s}.schema_version VALUES (`+fmt.Sprint(len(migrations))+`)`, schema)); err != nil {
		return fmt.Errorf("postgres store: migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres store: migrate: %w", err)
	}
	return nil
}

func tooNew(schema string, v int) error {
	return fmt.Errorf("postgres store: %w: schema %q is at version %d, this code knows versions up to %d", store.ErrSchemaTooNew, schema, v, len(migrations))
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readVersion returns the applied schema version; 0 when none.
func readVersion(ctx context.Context, q queryRower, schema string) (int, error) {
	var v int
	err := q.QueryRow(ctx, expand(`SELECT version FROM {s}.schema_version`, schema)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres store: read schema version: %w", err)
	}
	return v, nil
}

// checkVersion reports whether the schema is usable by this code.
func checkVersion(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, quoteSchema(schema)+".schema_version").Scan(&exists); err != nil {
		return fmt.Errorf("postgres store: %w", briefConnectError(err))
	}
	v := 0
	if exists {
		var err error
		if v, err = readVersion(ctx, pool, schema); err != nil {
			return err
		}
	}
	switch {
	case v > len(migrations):
		return tooNew(schema, v)
	case v == 0:
		return fmt.Errorf("postgres store: schema %q: %w", schema, store.ErrNotMigrated)
	case v < len(migrations):
		return fmt.Errorf("postgres store: schema %q is at version %d, this code needs %d: %w", schema, v, len(migrations), store.ErrNotMigrated)
	}
	return nil
}

// connectError is a failed connection told in one line.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// briefConnectError tells a failed connection in one line, each distinct
// reason once: pgx lists every attempt on a line of its own, and with
// sslmode=prefer a refused connection is tried twice, with the same reason.
func briefConnectError(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	var reasons []string
	add := func(e error) {
		for _, line := range strings.Split(e.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" && !slices.Contains(reasons, line) {
				reasons = append(reasons, line)
			}
		}
	}
	if joined, ok := ce.Unwrap().(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			add(e)
		}
	} else {
		add(ce.Unwrap())
	}
	return &connectError{msg: fmt.Sprintf("cannot connect to PostgreSQL as %s, database %s: %s", ce.Config.User, ce.Config.Database,
		strings.Join(reasons, "; ")), err: err}
}
