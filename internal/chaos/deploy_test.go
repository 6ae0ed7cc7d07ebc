package chaos

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
)

// resumeWithin bounds the time from a standby's promotion until workers
// and serve have completed work given after it.
const resumeWithin = 30 * time.Second

// outage is how long TestPostgresFailover leaves the database without a
// primary: longer than the workers' leases and the SQS queue's visibility
// timeout, so that heartbeats fail and leases run out meanwhile.
const outage = 3 * time.Second

// TestPostgresFailover runs the whole load on a primary with a
// synchronous streaming standby, reached by a DSN naming both; kills the
// primary's every process with SIGKILL under load and, after an outage,
// promotes the standby. Every acknowledged enqueue and send survives, no
// message completes under a lost lease, and the workers, the server and
// the consumers carry on, without a restart, completing new work within
// resumeWithin of the promotion.
func TestPostgresFailover(t *testing.T) {
	testproc.SkipShort(t, "runs PostgreSQL servers and kills the primary under load")
	needPrograms(t, filepath.Join(pgBin(), "initdb"), filepath.Join(pgBin(), "postgres"),
		filepath.Join(pgBin(), "pg_basebackup"), filepath.Join(pgBin(), "pg_ctl"))
	t.Parallel()
	began := time.Now()
	bin := buildLeasehold(t)
	cred := serverAccount(t)

	const standbyName = "leasehold_standby"
	primary := initCluster(t, cred)
	// On the command line, not in the configuration file: the standby
	// copies that file and, promoted, would wait for a standby of its own.
	primary.start(t, "synchronous_standby_names="+standbyName, "synchronous_commit=on")
	standby := standbyOf(t, primary, standbyName)
	standby.start(t)
	waitSync(t, primary.dsn("postgres"), standbyName)

	conn, err := pgx.Connect(context.Background(), primary.dsn("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE leasehold"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(context.Background())
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/leasehold?target_session_attrs=read-write&sslmode=disable",
		primary.port, standby.port)
	if out, err := exec.Command(bin, "--db", dsn, "migrate").CombinedOutput(); err != nil {
		t.Fatalf("leasehold migrate: %v\n%s", err, out)
	}

	l := startLoad(t, bin, dsn)
	loaded := time.Now()
	l.waitCompleted(100, 50, 30*time.Second)

	killed := time.Now()
	primary.kill(t)
	time.Sleep(outage) // the outage the test makes, not a wait for anything
	promoting := time.Now()
	standby.promote(t)
	promoted := time.Now()
	var firstEnqueued int64
	var firstSent string
	resumed := l.waitFor("work enqueued and sent after the promotion completed", resumeWithin, func() (bool, error) {
		if firstSent == "" {
			var ok bool
			if firstEnqueued, firstSent, ok = l.firstAcked(promoted); !ok {
				return false, nil
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w, err := l.st.Get(ctx, firstEnqueued)
		if err != nil || w.State != store.Completed {
			return false, err
		}
		var s store.Info
		if id, perr := storeID(ctx, l.st, firstSent); perr != nil {
			return false, perr
		} else if s, err = l.st.Get(ctx, id); err != nil {
			return false, err
		}
		return s.State == store.Completed, nil
	})
	// Each worker, the server and the test's store listen again.
	relistened := l.waitFor("every process listening on the promoted primary", resumeWithin, func() (bool, error) {
		n, err := l.listeners()
		return n == loadWorkers+2, err
	})
	// More load on the new primary before the end.
	w0, s0, err := l.completed()
	if err != nil {
		t.Fatal(err)
	}
	l.waitCompleted(w0+100, s0+50, 30*time.Second)
	ending := time.Now()
	l.finish(30 * time.Second)
	t.Logf("setup took %s; load ran %s before the kill; an outage of %s, then pg_ctl promote took %s; "+
		"work given after the promotion completed %s after it, every process listened again %s after that; the end took %s",
		loaded.Sub(began).Round(100*time.Millisecond), killed.Sub(loaded).Round(100*time.Millisecond), promoting.Sub(killed).Round(time.Millisecond), promoted.Sub(promoting).Round(time.Millisecond),
		resumed.Round(100*time.Millisecond), relistened.Round(100*time.Millisecond), time.Since(ending).Round(100*time.Millisecond))
}

// waitSync waits until the standby named name replicates synchronously
// from the primary at dsn.
func waitSync(t *testing.T, dsn, name string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		err := conn.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", name).Scan(&state)
		if err == nil && state == "sync" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby %s does not replicate synchronously: %q, %v", name, state, err)
		}
		time.Sleep(100 * time.Millisecond) // a real standby connecting
	}
}

// storeID is the store's id of the message the SQS API gave messageID.
func storeID(ctx context.Context, st store.Store, messageID string) (int64, error) {
	ids, err := serve.MessageIDs(ctx, st)
	if err != nil {
		return 0, err
	}
	id, ok := ids.ID(messageID)
	if !ok {
		return 0, fmt.Errorf("%q is no message id of this database", messageID)
	}
	return id, nil
}

// pgbouncer is the program TestPgBouncer runs: Debian installs it in
// /usr/sbin, which not every PATH names.
func pgbouncer() string {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	return "/usr/sbin/pgbouncer"
}

// TestPgBouncer runs the whole load through PgBouncer in transaction
// mode, which gives each transaction whichever server connection is free:
// no LISTEN (leasehold_listen=off) and no statement prepared on one
// connection and run on another. Nothing is lost and no completion is
// doubled.
func TestPgBouncer(t *testing.T) {
	testproc.SkipShort(t, "runs PgBouncer and the load through it")
	needPrograms(t, pgbouncer())
	t.Parallel()
	bin := buildLeasehold(t)
	direct := freshDatabase(t, bin)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")

	cred := serverAccount(t)
	dir := serverDir(t, cred)
	// Few server connections for many clients: transactions of different
	// clients take turns on each. A port another process took before
	// PgBouncer bound it is replaced, a few times at most.
	var port int
	for attempt := 1; ; attempt++ {
		port = freePort(t)
		conf := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 4
max_client_conn = 500
`, db, u.Hostname(), cmp.Or(u.Port(), "5432"), db, port, filepath.Join(dir, "userlist.txt"))
		for name, text := range map[string]string{"pgbouncer.ini": conf, "userlist.txt": `"postgres" ""` + "\n"} {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		bouncer := startServerProcess(t, cred, pgbouncer(), filepath.Join(dir, "pgbouncer.ini"))
		if bouncer.connect(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, db), attempt < 5) {
			break
		}
		t.Logf("port %d was taken before PgBouncer bound it; another", port)
	}
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&leasehold_listen=off", port, db)
	// The database is at the code's version already; the command checks
	// it through the pooler as a deployment would.
	if out, err := exec.Command(bin, "--db", dsn, "migrate").CombinedOutput(); err != nil {
		t.Fatalf("leasehold migrate through PgBouncer: %v\n%s", err, out)
	}

	l := startLoad(t, bin, dsn)
	l.waitCompleted(600, 150, 45*time.Second)
	l.finish(30 * time.Second)
}
