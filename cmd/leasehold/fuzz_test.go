package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"", "leasehold.db", "sqlite:/tmp/x.db", "sqlite:", "memory", "postgres://u:p@localhost:5432/db?sslmode=disable",
		"postgresql://localhost/db", "postgres://a:b@host:notaport/db", "mysql://x", "a?b", "x#y", "a.db?synchronous=normal", "a.db?synchronous=full&synchronous=normal", "host=h dbname=d", "dbname=x", "sqlite:a\x00b", "://", "postgres://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDSN(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--db") {
				t.Fatalf("error %q does not name the flag", err)
			}
			return
		}
		switch {
		case d.memory:
			if s != "memory" {
				t.Fatalf("%q parsed as memory", s)
			}
		case d.postgres != "":
			if d.postgres != s {
				t.Fatalf("postgres URL %q from %q", d.postgres, s)
			}
		default:
			// '?' begins the options, so a path never holds one; '#' and
			// '%' are escaped when the path reaches SQLite.
			if d.path == "" || strings.ContainsAny(d.path, "?\x00") {
				t.Fatalf("SQLite path %q from %q", d.path, s)
			}
			if d.synchronous != "" && d.synchronous != "full" && d.synchronous != "normal" {
				t.Fatalf("synchronous %q from %q", d.synchronous, s)
			}
		}
	})
}

func FuzzReadLines(f *testing.F) {
	for _, s := range []string{"", "a", "a\n", "a\nb", "a\r\nb\r\n", "\n\n", "x\ry\n", "\xff\xfe\n", "no newline at end"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		lines, err := readLines(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("readLines: %v", err)
		}
		// The lines are the input split at newlines, without a final empty
		// piece, each without one trailing CR.
		var want [][]byte
		if len(in) > 0 {
			want = bytes.Split(bytes.TrimSuffix(in, []byte("\n")), []byte("\n"))
		}
		if len(lines) != len(want) {
			t.Fatalf("%d lines from %q, want %d", len(lines), in, len(want))
		}
		for i := range want {
			if w := bytes.TrimSuffix(want[i], []byte("\r")); !bytes.Equal(lines[i], w) {
				t.Fatalf("line %d = %q, want %q (input %q)", i, lines[i], w, in)
			}
		}
	})
}

// FuzzWorkFlags feeds arbitrary flags to `work`. The database is memory:,
// which work refuses, so nothing ever runs: every outcome must be a usage
// error (status 2) on exactly one line, whatever the flags, durations and
// numbers, or the help that -h or --help asks for.
func FuzzWorkFlags(f *testing.F) {
	for _, s := range []string{"", "--lease 30s", "--lease 30s --heartbeat 10s", "--heartbeat 11s", "--lease -1s",
		"--concurrency 0", "--concurrency 99999999999", "--max-processing 0", "--reap-interval 1h", "--shutdown-timeout 1ns",
		"--lease 1000000h", "--drain --drain", "--lease=5s --heartbeat=1s", "--lease 9223372036854775807ns", "-x", "--", "--lease"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, flags string) {
		args := append([]string{"--db", "memory:", "work", "--queue", "q"}, strings.Fields(flags)...)
		args = append(args, "--", "true")
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		if code == exitOK && strings.Contains(stdout.String(), "Usage:") && (strings.Contains(flags, "-h") || strings.Contains(flags, "--help")) {
			return // help was asked for
		}
		if code != exitUsage {
			t.Fatalf("flags %q: exit %d, want %d; stderr %q", flags, code, exitUsage, stderr.String())
		}
		if lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); len(lines) != 1 || lines[0] == "" {
			t.Fatalf("flags %q: stderr %q, want one line", flags, stderr.String())
		}
	})
}
