package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/testproc"
)

// pgBin holds the PostgreSQL server programs the failover test runs:
// the newest of the versions installed the Debian way
// (/usr/lib/postgresql/VERSION/bin), else those on the PATH.
var pgBin = sync.OnceValue(func() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestVersion := "", -1
	for _, d := range dirs {
		if v, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil && v > bestVersion {
			best, bestVersion = d, v
		}
	}
	return best
})

// needPrograms fails t, without skipping, when a program a test runs is
// missing: the test server is configured (else pgtest.DSN skipped), so
// the machine is meant to run it.
func needPrograms(t *testing.T, paths ...string) {
	t.Helper()
	pgtest.DSN(t)
	for _, p := range paths {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is needed: %v", p, err)
		}
	}
}

// serverAccount is the credential that server processes run under:
// PostgreSQL and PgBouncer refuse to run as root, so a test running as
// root runs them as the postgres account; otherwise as itself (nil).
func serverAccount(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root, the servers need the postgres account: %v", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("postgres account ids %q/%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// serverDir makes an empty directory that the server account owns,
// removed when the test ends. It is not under t.TempDir, whose parents
// only root may enter.
func serverDir(t *testing.T, cred *syscall.Credential) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "leasehold-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// serverCommand is a command run under cred, in a process group of its
// own, so that killing the group kills a server and every process it
// started.
func serverCommand(cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	cmd.Dir = "/"
	return cmd
}

// runServerCommand runs a command to its end under cred and fails t with
// its output if it fails.
func runServerCommand(t *testing.T, cred *syscall.Credential, name string, args ...string) {
	t.Helper()
	if out, err := serverCommand(cred, name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// serverProcess is a long-running server started by startServerProcess.
type serverProcess struct {
	name   string
	cmd    *exec.Cmd
	output *testproc.SyncBuffer
	exited chan struct{}
}

// startServerProcess starts a server under cred; the server is killed,
// with the processes it started, when the test ends.
func startServerProcess(t *testing.T, cred *syscall.Credential, name string, args ...string) *serverProcess {
	t.Helper()
	p := &serverProcess{name: filepath.Base(name), cmd: serverCommand(cred, name, args...), output: &testproc.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill(t) })
	return p
}

// kill SIGKILLs the server's process group and waits for the server to
// exit.
func (p *serverProcess) kill(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit after SIGKILL", p.name)
	}
}

// connect waits until dsn accepts a connection that can run a statement,
// failing t after 30 s or if the server exits; but with portTaken, a
// server that exits because another process took its port first is not a
// failure: connect returns false, for the caller to start it again on
// another port.
func (p *serverProcess) connect(t *testing.T, dsn string, portTaken bool) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return true
		}
		select {
		case <-p.exited:
			if portTaken && strings.Contains(p.output.String(), "Address already in use") {
				return false
			}
			t.Fatalf("%s exited before it accepted connections:\n%s", p.name, p.output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not accept connections at %s: %v\n%s", p.name, dsn, err, p.output.String())
		}
		time.Sleep(100 * time.Millisecond) // a real server starting up
	}
}

// pgCluster is a PostgreSQL 15 server of the test's own, on a loopback
// port.
type pgCluster struct {
	*serverProcess
	cred *syscall.Credential
	dir  string
	port int
}

// dsn is a URL of the cluster's database db as the postgres user.
func (c *pgCluster) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// start runs the cluster's postmaster with the extra settings
// ("name=value") and waits until it accepts connections. Durability
// against the power going out is not under test, only against killed
// processes: fsync is off. A port that another process took between
// freePort and the postmaster's bind (a client's socket, say) is
// replaced, a few times at most.
func (c *pgCluster) start(t *testing.T, settings ...string) {
	t.Helper()
	t.Cleanup(func() { c.removeSharedMemory(t) })
	for attempt := 1; ; attempt++ {
		args := []string{"-D", c.dir, "-p", strconv.Itoa(c.port), "-k", c.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"}
		for _, s := range settings {
			args = append(args, "-c", s)
		}
		c.serverProcess = startServerProcess(t, c.cred, filepath.Join(pgBin(), "postgres"), args...)
		if c.connect(t, c.dsn("postgres"), attempt < 5) {
			return
		}
		t.Logf("port %d was taken before the postmaster bound it; another", c.port)
		c.port = freePort(t)
	}
}

// removeSharedMemory removes the System V shared memory segment of a
// postmaster that was killed: a killed postmaster leaves it behind, and
// the kernel allows only so many. It runs once the postmaster is gone;
// postmaster.pid names the segment on its seventh line.
func (c *pgCluster) removeSharedMemory(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.dir, "postmaster.pid"))
	if err != nil {
		return // a postmaster that stopped by itself removed both
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 7 {
		return
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return
	}
	id, err := strconv.Atoi(f[1])
	if err != nil {
		return
	}
	if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil && !errors.Is(err, unix.EINVAL) {
		t.Errorf("remove the shared memory segment %d of the postmaster in %s: %v", id, c.dir, err)
	}
}

// initCluster makes a new cluster in a directory of its own, trusting
// local connections, replication included.
func initCluster(t *testing.T, cred *syscall.Credential) *pgCluster {
	t.Helper()
	c := &pgCluster{cred: cred, dir: filepath.Join(serverDir(t, cred), "data"), port: freePort(t)}
	runServerCommand(t, cred, filepath.Join(pgBin(), "initdb"), "-D", c.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	return c
}

// standbyOf copies primary with pg_basebackup -R into a standby that
// streams from it under the application_name name.
func standbyOf(t *testing.T, primary *pgCluster, name string) *pgCluster {
	t.Helper()
	c := &pgCluster{cred: primary.cred, dir: filepath.Join(serverDir(t, primary.cred), "data"), port: freePort(t)}
	runServerCommand(t, c.cred, filepath.Join(pgBin(), "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port),
		"-U", "postgres", "-D", c.dir, "-R", "-X", "stream", "--no-sync", "-d", "application_name="+name)
	return c
}

// promote makes a standby a primary and waits until it is one.
func (c *pgCluster) promote(t *testing.T) {
	t.Helper()
	runServerCommand(t, c.cred, filepath.Join(pgBin(), "pg_ctl"), "promote", "-w", "-t", "30", "-D", c.dir)
}
