package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// passwordCatcher is a PostgreSQL server that asks every client for a
// password in clear text, records it, and refuses the connection.
func passwordCatcher(t *testing.T) (addr string, passwords <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				be := pgproto3.NewBackend(conn, conn)
				if _, err := be.ReceiveStartupMessage(); err != nil {
					return
				}
				be.Send(&pgproto3.AuthenticationCleartextPassword{})
				if be.Flush() != nil {
					return
				}
				if err := be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
					return
				}
				msg, err := be.Receive()
				if err != nil {
					return
				}
				if pw, ok := msg.(*pgproto3.PasswordMessage); ok {
					got <- pw.Password
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"})
				_ = be.Flush()
			}()
		}
	}()
	return ln.Addr().String(), got
}

// The password can come from PGPASSWORD or a password file, never the
// command line; both reach the server.
func TestPostgresPasswordFromEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  func(dir, host, port string) []string
	}{
		{"PGPASSWORD", func(_, _, _ string) []string { return []string{"PGPASSWORD=from-env"} }},
		{"PGPASSFILE", func(dir, host, port string) []string {
			file := filepath.Join(dir, "pgpass")
			if err := os.WriteFile(file, fmt.Appendf(nil, "%s:%s:app:alice:from-env\n", host, port), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{"PGPASSFILE=" + file}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, passwords := passwordCatcher(t)
			host, port, _ := net.SplitHostPort(addr)
			dir := t.TempDir()
			cmd := exec.Command(leaseholdBin(t), "--db", "postgres://alice@"+addr+"/app?sslmode=disable&connect_timeout=5", "stats")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "LEASEHOLD_DB=", "PGPASSWORD=", "PGPASSFILE=/nonexistent")
			cmd.Env = append(cmd.Env, tc.env(dir, host, port)...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("stats against a server that refuses everyone succeeded:\n%s", out)
			}
			select {
			case pw := <-passwords:
				if pw != "from-env" {
					t.Fatalf("the server got the password %q, want %q", pw, "from-env")
				}
			default:
				t.Fatalf("no password reached the server\n%s", out)
			}
		})
	}
}
