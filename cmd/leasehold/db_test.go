package main

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/internal/pgtest"

	_ "modernc.org/sqlite"
)

// snapshot returns the names and contents of the files in dir.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func TestReadOnlyCommandsChangeNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// An application's own database, without leasehold's tables.
	app := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", app)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, what TEXT); INSERT INTO orders (what) VALUES ('tea')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, path := range []string{"app.db", "absent.db"} {
		before := snapshot(t, dir)
		for _, args := range [][]string{{"stats"}, {"stats", "--queue", "q"}, {"list", "--queue", "q"}, {"dead", "list", "--queue", "q"}} {
			r := runBin(t, dir, "", append([]string{"--db", path}, args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, "not a leasehold database; run leasehold migrate") || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("%s %v: exit %d, stderr %q; want exit 1 saying it is not a leasehold database", path, args, r.code, r.stderr)
			}
		}
		if after := snapshot(t, dir); !sameFiles(before, after) {
			t.Fatalf("read-only commands on %s changed the directory", path)
		}
	}
	// A writing command migrates the shared file and keeps the app's table.
	runBin(t, dir, "", "--db", "app.db", "enqueue", "--queue", "q", "x").must(t)
	runBin(t, dir, "", "--db", "app.db", "stats").must(t)
	db, err = sql.Open("sqlite", app)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var what string
	if err := db.QueryRow(`SELECT what FROM orders`).Scan(&what); err != nil || what != "tea" {
		t.Fatalf("the application's table after migrating: %q, %v", what, err)
	}
}

func TestNewDatabaseFilesArePrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runBin(t, dir, "", "--db", "private.db", "enqueue", "--queue", "sig", "x").must(t)
	// A worker keeps the -wal and -shm files while the test looks.
	startWork(t, dir, "sqlite:private.db", "touch started; sleep 60\n")
	for _, name := range []string{"private.db", "private.db-wal", "private.db-shm"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Fatalf("%s has mode %#o, want 0600", name, perm)
		}
	}
}

func TestDSNForms(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A libpq keyword/value string is PostgreSQL, never a file name.
	r := runBin(t, dir, "", "--db", "host=127.0.0.1 port=1 user=app password=sekrit dbname=app connect_timeout=5", "stats")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot connect to PostgreSQL as app, database app") || strings.Contains(r.stderr, "sekrit") {
		t.Fatalf("keyword DSN: exit %d, stderr %q", r.code, r.stderr)
	}
	// A SQLite path is taken as it is, without percent-decoding.
	runBin(t, dir, "", "--db", "a%41.db", "enqueue", "--queue", "q", "x").must(t)
	runBin(t, dir, "", "--db", "sqlite:b%20c.db?synchronous=normal", "enqueue", "--queue", "q", "x").must(t)
	for _, name := range []string{"a%41.db", "b%20c.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("the file %s: %v", name, err)
		}
	}
	before := snapshot(t, dir)
	for _, tc := range []struct{ db, want string }{
		{"x.db?synchronous=off", "synchronous=off: want full or normal"},
		{"x.db?cache=shared", `unknown SQLite option "cache"`},
		{"postgresql://u@h:notaport/db", "malformed PostgreSQL URL"},
	} {
		r := runBin(t, dir, "", "--db", tc.db, "enqueue", "--queue", "q", "x")
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("--db %s: exit %d, stderr %q; want a usage error naming %q", tc.db, r.code, r.stderr, tc.want)
		}
	}
	if after := snapshot(t, dir); !sameFiles(before, after) {
		t.Fatal("a refused --db changed the directory")
	}
	// A database that cannot be created says why, in one line.
	r = runBin(t, dir, "", "--db", "/sys/leasehold-test.db", "enqueue", "--queue", "q", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot create /sys/leasehold-test.db: directory /sys is not writable") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("a database in a read-only directory: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A connection error is one line, each reason once.
func TestConnectionErrorIsOneLine(t *testing.T) {
	t.Parallel()
	r := runBin(t, t.TempDir(), "", "--db", "postgres://postgres@127.0.0.1:1/none", "stats")
	want := "leasehold: postgres store: cannot connect to PostgreSQL as postgres, database none: 127.0.0.1:1 (127.0.0.1): dial error: dial tcp 127.0.0.1:1: connect: connection refused\n"
	if r.code != 1 || r.stderr != want {
		t.Fatalf("exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}
}

// A server that accepts connections and never answers makes the command
// give up after the connect timeout, with an error that says so.
func TestConnectTimesOut(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	r := runBin(t, t.TempDir(), "", "--db", "postgres://postgres@"+ln.Addr().String()+"/x?sslmode=disable&connect_timeout=1", "stats")
	if r.code != 1 || !strings.Contains(r.stderr, "timeout") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want one line saying the connection timed out", r.code, r.stderr)
	}
}

// migrate works for a role that may create objects in its schema but not
// schemas in the database.
func TestMigrateWithSchemaPrivilegeOnly(t *testing.T) {
	t.Parallel()
	db := freshDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	role := "lh_owner_" + strings.TrimPrefix(name, "leasehold_cli_")
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"REVOKE CREATE ON DATABASE " + name + " FROM PUBLIC",
		"CREATE SCHEMA leasehold AUTHORIZATION " + role,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, db)
		if err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA leasehold CASCADE")
			c.Close(ctx)
		}
		if c, err := pgx.Connect(ctx, pgtest.DSN(t)); err == nil {
			_, _ = c.Exec(ctx, "DROP ROLE IF EXISTS "+role)
			c.Close(ctx)
		}
	})
	u.User = url.User(role)
	asRole := u.String()
	runBin(t, t.TempDir(), "", "--db", asRole, "migrate").must(t)
	runBin(t, t.TempDir(), "", "--db", asRole, "enqueue", "--queue", "q", "x").must(t)
}
