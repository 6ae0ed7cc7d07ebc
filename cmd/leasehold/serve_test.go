package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve refuses, before it touches the database, to take unsigned
// requests from beyond this machine, and a half-given key pair.
func TestServeRefusesUnsafeSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "never.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", db, "serve", "--addr", "0.0.0.0:9324"}, "refusing to listen on 0.0.0.0:9324 without credentials"},
		{[]string{"--db", db, "serve", "--addr", ":9324"}, "refusing to listen on :9324 without credentials"},
		{[]string{"--db", db, "serve", "--reap-interval", "0s"}, "--reap-interval and --shutdown-timeout must be positive"},
	} {
		r := runBin(t, dir, "", tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("leasehold %v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("a refused serve created the database: %v", err)
	}
}
