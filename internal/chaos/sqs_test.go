package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/internal/sqsid"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// An SQS consumer is this test binary started with sqsConsumerLog set: init
// runs the consumer instead of the tests, since the package's TestMain
// serves the other chaos tests' children.
const (
	sqsConsumerLog      = "LEASEHOLD_SQS_CONSUMER_LOG" // the consumer's own log file
	sqsConsumerEndpoint = "LEASEHOLD_SQS_CONSUMER_ENDPOINT"
	sqsConsumerQueueURL = "LEASEHOLD_SQS_CONSUMER_QUEUE_URL"
	sqsConsumerSeed     = "LEASEHOLD_SQS_CONSUMER_SEED"
	// sqsConsumerOutages, set to 1, has a consumer ride out the server's
	// errors while its database is away (see consumer.outages).
	sqsConsumerOutages = "LEASEHOLD_SQS_CONSUMER_OUTAGES"
	// sqsChaosSeed, when set, repeats a run's kill schedule and the
	// consumers' choices (not the timing of real processes).
	sqsChaosSeed = "LEASEHOLD_SQS_CHAOS_SEED"
)

// The scenario.
const (
	sqsQueue     = "sqs-chaos"
	sqsMessages  = 300
	sqsConsumers = 4
	sqsKills     = 10
	// sqsVisibility is the queue's visibility timeout: the lease of every
	// receive.
	sqsVisibility = 2 * time.Second
	// sqsDeadline bounds the run from the moment the first consumers are
	// ready until the queue is empty.
	sqsDeadline = 60 * time.Second
	// sqsRefused is the error code of a delete under a lost lease.
	sqsRefused = "ReceiptHandleIsInvalid"
)

func init() {
	if path := os.Getenv(sqsConsumerLog); path != "" {
		os.Exit(runSQSConsumer(path))
	}
}

// TestSQSChaos: the conformance suite's guarantees hold through the SQS
// API. The real server runs as a child process; consumer processes use
// the AWS SDK and are killed at random and replaced; some work past their
// visibility timeout. In the end every message is completed exactly once,
// under the lease of the one delete that succeeded, and every delete under
// a lost lease was refused.
func TestSQSChaos(t *testing.T) {
	testproc.SkipShort(t, "builds the command and kills SQS consumer processes")
	t.Parallel()
	bin := buildLeasehold(t)
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sqs.db")
		sqsChaos(t, bin, "sqlite:"+path, func(ctx context.Context) (store.Store, error) {
			return sqlite.Open(ctx, sqlite.Config{Path: path})
		})
	})
	t.Run("postgres", func(t *testing.T) {
		db := freshDatabase(t, bin)
		sqsChaos(t, bin, db, func(ctx context.Context) (store.Store, error) {
			return postgres.Open(ctx, postgres.Config{DSN: db})
		})
	})
}

// buildLeasehold builds the command into a temporary directory, with the
// race detector when this test binary has it.
func buildLeasehold(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leasehold")
	args := []string{"build", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	args = append(args, "github.com/leasehold/leasehold/cmd/leasehold")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// freshDatabase creates an empty PostgreSQL database for one test,
// migrated by the command itself, dropped when the test ends, and returns
// its URL. The command has no way to name a schema, so the test's tables
// live in a database of their own.
func freshDatabase(t *testing.T, bin string) string {
	t.Helper()
	base := pgtest.DSN(t)
	pool := pgtest.Pool(t)
	ctx := context.Background()
	name := fmt.Sprintf("leasehold_sqs_chaos_%016x", rand.Uint64())
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", pgtest.EnvDSN, err)
	}
	u.Path = "/" + name
	db := u.String()
	if out, err := exec.Command(bin, "--db", db, "migrate").CombinedOutput(); err != nil {
		t.Fatalf("leasehold migrate: %v\n%s", err, out)
	}
	return db
}

// sqsServer is a "leasehold serve" child process.
type sqsServer struct {
	cmd      *exec.Cmd
	output   *testproc.SyncBuffer
	endpoint string
	exited   chan struct{}
	err      error // once exited is closed
}

// servingAt finds the address serve logs once it listens.
var servingAt = regexp.MustCompile(`addr=(http://\S+)`)

// startServer starts the server on a loopback port of the system's
// choosing, learns it from the server's log, and waits until /readyz
// answers 200.
func startServer(t *testing.T, bin, db string) *sqsServer {
	t.Helper()
	s := &sqsServer{output: &testproc.SyncBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "--db", db, "--log-level", "info", "serve", "--addr", "127.0.0.1:0", "--reap-interval", "100ms")
	// Unsigned: the server listens on loopback only.
	s.cmd.Env = append(os.Environ(), "LEASEHOLD_ACCESS_KEY_ID=", "LEASEHOLD_SECRET_ACCESS_KEY=")
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start leasehold serve: %v", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})

	// A real process binds a real socket: a bounded number of attempts.
	hc := &http.Client{Timeout: 2 * time.Second}
	const attempts = 150
	for i := 1; ; i++ {
		var resp *http.Response
		err := errors.New("it has not logged its address yet")
		if m := servingAt.FindStringSubmatch(s.output.String()); m != nil {
			s.endpoint = m[1]
			resp, err = hc.Get(s.endpoint + "/readyz")
		}
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		select {
		case <-s.exited:
			t.Fatalf("leasehold serve exited before it was ready: %v\n%s", s.err, s.output.String())
		default:
		}
		if i == attempts {
			t.Fatalf("leasehold serve at %q not ready after %d attempts: %v\n%s", s.endpoint, attempts, err, s.output.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort is a loopback TCP port that was free a moment ago, for a
// server that must be told its port (PostgreSQL, PgBouncer); never one
// it gave before, so that the servers of tests running side by side do
// not get the same one.
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			return port
		}
	}
	t.Fatal("no loopback port that was not given before")
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// stop sends SIGTERM and requires the server to exit with status 0.
func (s *sqsServer) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to leasehold serve: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("leasehold serve did not exit within 30s of SIGTERM\n%s", s.output.String())
	}
	if s.err != nil {
		t.Fatalf("leasehold serve after SIGTERM: %v, want exit status 0\n%s", s.err, s.output.String())
	}
}

// newSQSClient is an SDK client of the server. It does not retry: each
// call is one request, so what a consumer logs is the outcome of one
// delete (a retry of a delete that went through would be refused), and a
// send is never sent twice.
func newSQSClient(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{BaseEndpoint: aws.String(endpoint), Region: "us-east-1",
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1, HTTPClient: &http.Client{Timeout: 30 * time.Second}})
}

// createSQSQueue creates the queue sqsQueue with the visibility timeout
// sqsVisibility and returns its URL.
func createSQSQueue(t *testing.T, client *sqs.Client) string {
	t.Helper()
	created, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqsQueue),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(int(sqsVisibility / time.Second))}})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	return *created.QueueUrl
}

// startConsumer starts a consumer process of the queue at queueURL, which
// logs to log, with the extra environment variables env, and waits until
// it is ready.
func startConsumer(t *testing.T, log, endpoint, queueURL string, seed uint64, env ...string) *sqsChild {
	t.Helper()
	c := &sqsChild{log: log}
	c.proc = testproc.Start(t, append([]string{sqsConsumerLog + "=" + log, sqsConsumerEndpoint + "=" + endpoint,
		sqsConsumerQueueURL + "=" + queueURL, sqsConsumerSeed + "=" + strconv.FormatUint(seed, 10)}, env...)...)
	c.proc.Expect(t, "ready")
	return c
}

// sqsChild is one consumer process and its log.
type sqsChild struct {
	proc   *testproc.Child
	log    string
	killed bool // by SIGKILL; else stopped by SIGTERM at the end
}

func sqsChaos(t *testing.T, bin, db string, open func(context.Context) (store.Store, error)) {
	ctx := context.Background()
	seed := rand.Uint64()
	if s := os.Getenv(sqsChaosSeed); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", sqsChaosSeed, s, err)
		}
	}
	t.Logf("seed %d (%s=%d repeats the schedule)", seed, sqsChaosSeed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	began := time.Now()

	srv := startServer(t, bin, db)
	client := newSQSClient(srv.endpoint)
	queueURL := createSQSQueue(t, client)

	// sent maps each message id the server gave to its body; bodies are
	// unique.
	sent := map[string]string{}
	for i := 0; i < sqsMessages; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, sqsMessages); j++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String("m" + strconv.Itoa(j)),
				MessageBody: aws.String(fmt.Sprintf("body-%03d-%016x", j, rng.Uint64()))})
		}
		out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			t.Fatalf("SendMessageBatch: %v", err)
		}
		if len(out.Failed) != 0 || len(out.Successful) != len(entries) {
			t.Fatalf("SendMessageBatch: %d sent, failed %+v; want all %d sent", len(out.Successful), out.Failed, len(entries))
		}
		for _, ok := range out.Successful {
			j, _ := strconv.Atoi(strings.TrimPrefix(*ok.Id, "m"))
			if _, dup := sent[*ok.MessageId]; dup {
				t.Fatalf("SendMessageBatch gave message id %s twice", *ok.MessageId)
			}
			sent[*ok.MessageId] = *entries[j-i].MessageBody
		}
	}

	dir := t.TempDir()
	var children []*sqsChild
	start := func() *sqsChild {
		c := startConsumer(t, filepath.Join(dir, fmt.Sprintf("consumer-%02d.log", len(children))), srv.endpoint, queueURL, rng.Uint64())
		children = append(children, c)
		return c
	}
	// A consumer ends only when the test ends it; one that exits by itself
	// met an error.
	checkAlive := func(live []*sqsChild) {
		t.Helper()
		for _, c := range live {
			select {
			case <-c.proc.Done():
				t.Fatalf("consumer %s exited by itself: %v", filepath.Base(c.log), c.proc.Wait(t))
			default:
			}
		}
	}
	live := make([]*sqsChild, sqsConsumers)
	for i := range live {
		live[i] = start()
	}
	deadline := time.Now().Add(sqsDeadline)

	// The chaos: at random moments, a random consumer is killed and a new
	// one takes its place.
	for range sqsKills {
		time.Sleep(time.Duration(300+rng.IntN(1000)) * time.Millisecond) // the schedule's pause, not a wait for anything
		checkAlive(live)
		i := rng.IntN(len(live))
		if err := live[i].proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL: %v", err)
		}
		<-live[i].proc.Done()
		live[i].killed = true
		live[i] = start()
	}

	// The survivors drain the queue: nothing visible, in flight or delayed.
	attrNames := []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, types.QueueAttributeNameApproximateNumberOfMessagesDelayed}
	for {
		checkAlive(live)
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: attrNames})
		if err != nil {
			t.Fatalf("GetQueueAttributes: %v", err)
		}
		drained := true
		for _, n := range attrNames {
			drained = drained && out.Attributes[string(n)] == "0"
		}
		if drained {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue did not drain within %s of the consumers' start (seed %d): %v", sqsDeadline, seed, out.Attributes)
		}
		time.Sleep(100 * time.Millisecond) // polling real processes, bounded by the deadline
	}
	drainedAfter := time.Since(began)

	// The survivors stop gracefully: each finishes the deliveries it holds
	// (a late delete is refused) and exits with status 0.
	for _, c := range live {
		if err := c.proc.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM to consumer: %v", err)
		}
	}
	for _, c := range live {
		if err := c.proc.Wait(t); err != nil {
			t.Fatalf("consumer %s after SIGTERM: %v, want exit status 0", filepath.Base(c.log), err)
		}
	}
	srv.stop(t)

	st, err := open(ctx)
	if err != nil {
		t.Fatalf("open the server's database: %v", err)
	}
	defer st.Close()
	ids, err := serve.MessageIDs(ctx, st)
	if err != nil {
		t.Fatalf("the database's SQS message ids: %v", err)
	}
	logs := readSQSLogs(t, children, sent, ids)
	checkSQSOutcome(t, st, sent, &logs)
	// The run must have exercised what it claims to.
	if logs.refusedCount == 0 {
		t.Fatal("no delete was refused under a lost lease: the run never exercised fencing")
	}
	if logs.redelivered == 0 {
		t.Fatal("no delivery abandoned by a killed consumer was received again: the kills never hit a consumer at work")
	}
	t.Logf("%d messages, %d consumers started, %d killed; %d deliveries logged: %d deleted, %d deletes refused under a lost lease, "+
		"%d abandoned by a kill and received again, %d completed by a delete whose consumer was killed before it logged the outcome; "+
		"drained after %s", len(sent), len(children), sqsKills, logs.deliveries, logs.deleted, logs.refusedCount,
		logs.redelivered, logs.completedUnlogged, drainedAfter.Round(100*time.Millisecond))
}

// sqsHandle is a receipt handle read back: "<id>.<fencing token>.<mac>",
// the numbers in base 36; the MAC is the server's, not checked here.
type sqsHandle struct {
	id, token int64
	mac       string
}

func parseSQSHandle(h string) (sqsHandle, error) {
	parts := strings.Split(h, ".")
	if len(parts) != 3 {
		return sqsHandle{}, fmt.Errorf("receipt handle %q: want <id>.<token>.<mac>", h)
	}
	id, err1 := strconv.ParseInt(parts[0], 36, 64)
	token, err2 := strconv.ParseInt(parts[1], 36, 64)
	if err := errors.Join(err1, err2); err != nil || id <= 0 || token <= 0 {
		return sqsHandle{}, fmt.Errorf("receipt handle %q: id and fencing token: %v", h, err)
	}
	return sqsHandle{id: id, token: token, mac: parts[2]}, nil
}

// sqsLogs is what the consumers' logs say, per message id: the fencing
// tokens of the handles in each outcome.
type sqsLogs struct {
	// ids names the messages as the API did.
	ids  sqsid.Mapper
	done map[int64][]int64 // deletes that succeeded
	// refused are deletes refused with ReceiptHandleIsInvalid.
	refused map[int64][]int64
	// cut are deletes tried by a consumer that was killed before it
	// logged their outcome, or whose outcome the server could not tell:
	// they may or may not have gone through.
	cut map[int64][]int64
	// abandoned are deliveries that a killed consumer received and never
	// tried to delete.
	abandoned map[int64][]int64

	deliveries, deleted, refusedCount, unknown int
	// Filled in by checkSQSOutcome.
	redelivered, completedUnlogged int
}

// readSQSLogs reads every consumer's log. A line is "recv <message id>
// <handle> <body>", "try <message id> <handle>" before a delete, then
// "done ...", "refused ..." or, when the server failed, "unknown ..."
// after it. The last line of a killed consumer's log may be cut short: it
// is ignored.
func readSQSLogs(t *testing.T, children []*sqsChild, sent map[string]string, ids sqsid.Mapper) sqsLogs {
	t.Helper()
	l := sqsLogs{ids: ids, done: map[int64][]int64{}, refused: map[int64][]int64{}, cut: map[int64][]int64{}, abandoned: map[int64][]int64{}}
	for _, c := range children {
		name := filepath.Base(c.log)
		data, err := os.ReadFile(c.log)
		if err != nil {
			t.Fatalf("consumer log: %v", err)
		}
		lines := strings.Split(string(data), "\n")
		if last := lines[len(lines)-1]; last != "" && !c.killed {
			t.Fatalf("%s ends in a partial line %q, but its consumer stopped gracefully", name, last)
		}
		lines = lines[:len(lines)-1]
		received := map[string]int64{} // handle → fencing token, until its delete is tried
		tried := map[string]int64{}    // handle → fencing token, until the delete's outcome
		for n, line := range lines {
			f := strings.Fields(line)
			bad := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("%s:%d %q: %s", name, n+1, line, fmt.Sprintf(format, args...))
			}
			if len(f) < 3 {
				bad("too few fields")
			}
			kind, id, h := f[0], f[1], f[2]
			ph, err := parseSQSHandle(h)
			if err != nil {
				bad("%v", err)
			}
			if ids.MessageID(ph.id) != id {
				bad("the handle names message %d (%s), want message %s", ph.id, ids.MessageID(ph.id), id)
			}
			switch kind {
			case "recv":
				if len(f) != 4 {
					bad("want recv <id> <handle> <body>")
				}
				body, ok := sent[id]
				if !ok || body != f[3] {
					bad("received message %s with body %q; it was sent with %q", id, f[3], body)
				}
				received[h] = ph.token
				l.deliveries++
			case "try":
				if _, ok := received[h]; !ok {
					bad("a delete tried with a handle this consumer did not receive, or tried twice")
				}
				delete(received, h)
				tried[h] = ph.token
			case "done", "refused", "unknown":
				if _, ok := tried[h]; !ok {
					bad("an outcome of a delete that was not tried")
				}
				delete(tried, h)
				switch kind {
				case "done":
					l.done[ph.id] = append(l.done[ph.id], ph.token)
					l.deleted++
				case "refused":
					l.refused[ph.id] = append(l.refused[ph.id], ph.token)
					l.refusedCount++
				default:
					l.cut[ph.id] = append(l.cut[ph.id], ph.token)
					l.unknown++
				}
			default:
				bad("unknown kind %q", kind)
			}
		}
		if !c.killed && len(received)+len(tried) > 0 {
			t.Fatalf("%s: its consumer stopped gracefully but left %d deliveries undeleted and %d deletes without an outcome",
				name, len(received), len(tried))
		}
		for h, token := range tried {
			id := mustHandle(h).id
			l.cut[id] = append(l.cut[id], token)
		}
		for h, token := range received {
			id := mustHandle(h).id
			l.abandoned[id] = append(l.abandoned[id], token)
		}
	}
	return l
}

func mustHandle(h string) sqsHandle {
	ph, err := parseSQSHandle(h)
	if err != nil {
		panic(err) // parsed once already
	}
	return ph
}

// checkSQSOutcome checks the store after the run against the messages sent
// and the consumers' logs.
func checkSQSOutcome(t *testing.T, st store.Store, sent map[string]string, l *sqsLogs) {
	t.Helper()
	ctx := context.Background()
	s, err := st.Stats(ctx, sqsQueue)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if s.Completed != int64(len(sent)) || s.Pending != 0 || s.Waiting != 0 || s.Processing != 0 || s.Dead != 0 || s.Cancelled != 0 {
		t.Fatalf("after the run: %+v; want all %d messages completed and nothing else", s, len(sent))
	}
	for _, state := range []store.State{store.Pending, store.Waiting, store.Processing, store.Dead, store.Cancelled} {
		if infos, err := st.List(ctx, store.ListFilter{Queue: sqsQueue, State: state, Limit: 10}); err != nil || len(infos) != 0 {
			t.Fatalf("messages %s after the run: %d (%v), want none", state, len(infos), err)
		}
	}
	completed, err := st.List(ctx, store.ListFilter{Queue: sqsQueue, State: store.Completed, Limit: store.MaxBatch})
	if err != nil {
		t.Fatalf("List completed: %v", err)
	}
	if len(completed) != len(sent) {
		t.Fatalf("%d messages completed, want the %d sent", len(completed), len(sent))
	}
	for _, in := range completed {
		id := l.ids.MessageID(in.ID)
		body, ok := sent[id]
		if !ok || string(in.Payload) != body {
			t.Fatalf("completed message %s with payload %q was not sent (sent: %q)", id, in.Payload, body)
		}
		token := in.FencingToken
		done := l.done[in.ID]
		switch {
		case len(done) > 1:
			t.Fatalf("message %s: %d deletes succeeded (fencing tokens %v), want one", id, len(done), done)
		case len(done) == 1 && done[0] != token:
			t.Fatalf("message %s completed under fencing token %d, but the delete that succeeded held token %d", id, token, done[0])
		case len(done) == 0 && !slices.Contains(l.cut[in.ID], token):
			t.Fatalf("message %s completed under fencing token %d, but no consumer logged a delete under it (succeeded: none, cut short by a kill: %v, refused: %v)",
				id, token, l.cut[in.ID], l.refused[in.ID])
		case len(done) == 0:
			l.completedUnlogged++
		}
		for _, r := range l.refused[in.ID] {
			if r >= token {
				t.Fatalf("message %s: a delete under fencing token %d was refused, but the message completed under %d: only older leases are lost", id, r, token)
			}
		}
		for _, a := range l.abandoned[in.ID] {
			if a >= token {
				t.Fatalf("message %s: a killed consumer abandoned its delivery under token %d, yet the message completed under %d", id, a, token)
			}
			l.redelivered++
		}
	}
}

// runSQSConsumer is a consumer process's main: it receives batches and
// works each message for a random short time, sometimes past the
// visibility timeout, then deletes it, logging every step to its own log,
// until SIGTERM. Any error but a refused delete ends it with status 1,
// unless it rides out outages.
func runSQSConsumer(logPath string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		return 1
	}
	seed, err := strconv.ParseUint(os.Getenv(sqsConsumerSeed), 10, 64)
	if err != nil {
		return fail(err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	c := &consumer{sqs: newSQSClient(os.Getenv(sqsConsumerEndpoint)), queueURL: os.Getenv(sqsConsumerQueueURL),
		rng: rand.New(rand.NewPCG(seed, 1)), logf: f, outages: os.Getenv(sqsConsumerOutages) == "1"}
	stop, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	fmt.Println("ready")
	// Requests are not cancelled by SIGTERM: a batch received is worked
	// and deleted before the consumer exits.
	for stop.Err() == nil {
		if err := c.round(context.Background()); err != nil {
			return fail(err)
		}
	}
	c.slow.Wait()
	if err := c.slowErr(); err != nil {
		return fail(err)
	}
	return 0
}

type consumer struct {
	sqs      *sqs.Client
	queueURL string
	rng      *rand.Rand // the main goroutine's only
	logf     *os.File
	// outages: an error from the server (its database is away) is
	// ridden out: a failed receive is tried again a moment later, and a
	// failed delete is logged as "unknown", since it may have gone
	// through before the failure.
	outages bool

	// slow runs the deliveries worked past the visibility timeout, beside
	// the next rounds.
	slow sync.WaitGroup
	mu   sync.Mutex
	err  error // the first error of a slow delivery
}

func (c *consumer) slowErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// log appends one line in one write: lines of concurrent deletes do not
// interleave, and a kill cuts at most the last one short.
func (c *consumer) log(fields ...string) error {
	_, err := c.logf.WriteString(strings.Join(fields, " ") + "\n")
	return err
}

// round receives up to 10 messages and works them at once, each for its
// own time. In every round, one message received for the first time is
// worked past the visibility timeout, so that its delete is refused; the
// round does not wait for it. (A message is slow at most
// once: the queue's tail does not wait on a message slow time and again.) In a third of the rounds the others are deleted together,
// with DeleteMessageBatch, once all of them are worked; else each on its
// own when it is.
func (c *consumer) round(ctx context.Context) error {
	if err := c.slowErr(); err != nil {
		return err
	}
	out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.queueURL),
		MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil && c.outages {
		time.Sleep(100 * time.Millisecond) // a pause before the next try, while the database is away
		return nil
	}
	if err != nil {
		return fmt.Errorf("ReceiveMessage: %w", err)
	}
	msgs := out.Messages
	if len(msgs) == 0 {
		return nil
	}
	for _, m := range msgs {
		if err := c.log("recv", *m.MessageId, *m.ReceiptHandle, *m.Body); err != nil {
			return err
		}
	}
	slow := -1
	var first []int
	for i, m := range msgs {
		if m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)] == "1" {
			first = append(first, i)
		}
	}
	if len(first) > 0 {
		slow = first[c.rng.IntN(len(first))]
	}
	together := c.rng.IntN(3) == 0
	var wg sync.WaitGroup
	errs := make(chan error, len(msgs))
	var batch []types.Message
	var batchWork time.Duration
	for i, m := range msgs {
		work := time.Duration(20+c.rng.IntN(380)) * time.Millisecond
		switch {
		case i == slow:
			work = sqsVisibility + time.Duration(200+c.rng.IntN(400))*time.Millisecond
			c.slow.Go(func() {
				time.Sleep(work) // the work
				if err := c.delete(ctx, m); err != nil {
					c.mu.Lock()
					c.err = cmp.Or(c.err, err)
					c.mu.Unlock()
				}
			})
		case together:
			batch, batchWork = append(batch, m), max(batchWork, work)
		default:
			wg.Go(func() {
				time.Sleep(work) // the work
				errs <- c.delete(ctx, m)
			})
		}
	}
	if len(batch) > 0 {
		wg.Go(func() {
			time.Sleep(batchWork) // the work
			errs <- c.deleteBatch(ctx, batch)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *consumer) delete(ctx context.Context, m types.Message) error {
	id, h := *m.MessageId, *m.ReceiptHandle
	if err := c.log("try", id, h); err != nil {
		return err
	}
	_, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(c.queueURL), ReceiptHandle: aws.String(h)})
	switch {
	case err == nil:
		return c.log("done", id, h)
	case refused(err):
		return c.log("refused", id, h)
	case c.outages:
		return c.log("unknown", id, h)
	default:
		return fmt.Errorf("DeleteMessage %s: %w", id, err)
	}
}

func (c *consumer) deleteBatch(ctx context.Context, msgs []types.Message) error {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	byEntry := map[string]types.Message{}
	for i, m := range msgs {
		e := "e" + strconv.Itoa(i)
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(e), ReceiptHandle: m.ReceiptHandle}
		byEntry[e] = m
		if err := c.log("try", *m.MessageId, *m.ReceiptHandle); err != nil {
			return err
		}
	}
	out, err := c.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(c.queueURL), Entries: entries})
	if err != nil && c.outages {
		for _, m := range msgs {
			if err := c.log("unknown", *m.MessageId, *m.ReceiptHandle); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("DeleteMessageBatch: %w", err)
	}
	if len(out.Successful)+len(out.Failed) != len(entries) {
		return fmt.Errorf("DeleteMessageBatch of %d entries: %d successful, %d failed", len(entries), len(out.Successful), len(out.Failed))
	}
	for _, s := range out.Successful {
		m, ok := byEntry[aws.ToString(s.Id)]
		if !ok {
			return fmt.Errorf("DeleteMessageBatch: success of unknown entry %q", aws.ToString(s.Id))
		}
		if err := c.log("done", *m.MessageId, *m.ReceiptHandle); err != nil {
			return err
		}
	}
	for _, f := range out.Failed {
		m, ok := byEntry[aws.ToString(f.Id)]
		if !ok {
			return fmt.Errorf("DeleteMessageBatch: failure of unknown entry %q", aws.ToString(f.Id))
		}
		kind := "refused"
		if aws.ToString(f.Code) != sqsRefused {
			kind = "unknown"
		}
		if kind == "unknown" && !c.outages {
			return fmt.Errorf("DeleteMessageBatch entry of message %s: %s: %s", *m.MessageId, aws.ToString(f.Code), aws.ToString(f.Message))
		}
		if err := c.log(kind, *m.MessageId, *m.ReceiptHandle); err != nil {
			return err
		}
	}
	return nil
}

// refused reports whether err is the server refusing a receipt handle
// whose lease is lost.
func refused(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == sqsRefused
}
