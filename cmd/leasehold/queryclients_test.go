package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The clients that speak SQS's query protocol drive a real server:
// Debian's AWS CLI (2.9, whose botocore speaks query for SQS), Debian's
// boto3, and a Celery application on Debian's Celery and kombu (its SQS transport,
// before 5.3.4, speaks query too, through boto3 and pycurl). Without
// them the tests skip, unless LEASEHOLD_TEST_QUERY_CLIENTS is 1 (as in
// CI), when they fail. LEASEHOLD_AWS names the CLI, default /usr/bin/aws
// (not an aws on PATH, which may be a newer one that speaks JSON); the
// Python is /usr/bin/python3, Debian's, whose packages these are.
const (
	envQueryClients = "LEASEHOLD_TEST_QUERY_CLIENTS"
	envAWS          = "LEASEHOLD_AWS"
	debianPython    = "/usr/bin/python3"
)

// queryClient returns the path of a client, or skips (in CI, fails) the
// test when check says it is missing.
func queryClient(t *testing.T, what, path string, check func() error) string {
	t.Helper()
	err := check()
	if err == nil {
		return path
	}
	if os.Getenv(envQueryClients) == "1" {
		t.Fatalf("%s=1 but %s is missing: %v", envQueryClients, what, err)
	}
	t.Skipf("%s is missing (%v); set %s=1 to make this a failure", what, err, envQueryClients)
	return ""
}

// awsCLI returns Debian's AWS CLI.
func awsCLI(t *testing.T) string {
	path := os.Getenv(envAWS)
	if path == "" {
		path = "/usr/bin/aws"
	}
	return queryClient(t, "the AWS CLI ("+path+", Debian's awscli)", path, func() error {
		_, err := exec.LookPath(path)
		return err
	})
}

// plainServing is the address a serve process without TLS logs.
var plainServing = regexp.MustCompile(`addr=http://(127\.0\.0\.1:\d+)`)

// queryServer is a serve process behind a proxy that records the
// protocol of each request it passes: clients are sent to the proxy, and
// the test can tell that they spoke the query protocol.
type queryServer struct {
	url string // the proxy's

	mu    sync.Mutex
	query map[string]int // query requests by action
	json  int            // JSON requests
}

// startQueryServer runs serve on db (a SQLite path, or a PostgreSQL URL
// already migrated), with the credentials when key is set.
func startQueryServer(t *testing.T, db, key, secret string) *queryServer {
	t.Helper()
	dir := t.TempDir()
	if key != "" {
		t.Setenv("LEASEHOLD_ACCESS_KEY_ID", key)
		t.Setenv("LEASEHOLD_SECRET_ACCESS_KEY", secret)
	}
	_, stderr := startProcess(t, dir, "--db", db, "serve", "--addr", "127.0.0.1:0")
	var addr string
	waitUntil(t, "the server's serving line", func() bool {
		m := plainServing.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	s := &queryServer{query: map[string]int{}}
	target, _ := url.Parse("http://" + addr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	// A worker stopped in a long poll cuts its request: not worth a line.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The Host header stays the proxy's, which the client signed.
		body, err := requestBody(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		if r.Header.Get("X-Amz-Target") != "" {
			s.json++
		} else {
			form, _ := url.ParseQuery(string(body))
			action := form.Get("Action")
			if action == "" {
				action = r.URL.Query().Get("Action")
			}
			s.query[action]++
		}
		s.mu.Unlock()
		r.Body = nopCloser{bytes.NewReader(body)}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	s.url = front.URL
	return s
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func requestBody(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}

// spoke checks that the clients sent query requests of each action and
// no JSON ones.
func (s *queryServer) spoke(t *testing.T, actions ...string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, a := range actions {
		if s.query[a] == 0 {
			missing = append(missing, a)
		}
	}
	if s.json > 0 || len(missing) > 0 {
		t.Fatalf("%d JSON requests, query requests %v; want query requests of %v too", s.json, s.query, missing)
	}
}

// queryDatabases runs test on a SQLite file and on a fresh PostgreSQL
// database.
func queryDatabases(t *testing.T, test func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) { test(t, filepath.Join(t.TempDir(), "q.db")) })
	t.Run("postgres", func(t *testing.T) {
		db := freshDatabase(t)
		runBin(t, t.TempDir(), "", "--db", db, "migrate").must(t)
		test(t, db)
	})
}

// The AWS CLI of Debian, which speaks the query protocol, creates a
// queue, sends, receives and deletes, singly and in batches, lists and
// reads attributes, with and without credentials; and a wrong secret is
// refused with the signer's code.
func TestAWSCLIQueryProtocol(t *testing.T) {
	aws := awsCLI(t)
	leaseholdBin(t)
	queryDatabases(t, func(t *testing.T, db string) {
		for _, signed := range []bool{false, true} {
			name := map[bool]string{false: "unsigned", true: "signed"}[signed]
			t.Run(name, func(t *testing.T) {
				const key, secret = "AKIDQUERYCLI", "secret-access-key-for-the-cli"
				var s *queryServer
				if signed {
					s = startQueryServer(t, db, key, secret)
				} else {
					s = startQueryServer(t, db, "", "")
				}
				cli := func(secretUsed string, args ...string) (map[string]any, string, error) {
					t.Helper()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					full := append([]string{"--endpoint-url", s.url, "--region", "us-east-1", "--output", "json"}, args...)
					if !signed {
						full = append(full, "--no-sign-request")
					}
					cmd := exec.CommandContext(ctx, aws, full...)
					cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secretUsed,
						"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=", "AWS_MAX_ATTEMPTS=1")
					var out, errb bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &errb
					err := cmd.Run()
					var v map[string]any
					if err == nil && out.Len() > 0 {
						if jerr := json.Unmarshal(out.Bytes(), &v); jerr != nil {
							t.Fatalf("aws %v printed %q: %v", args, out.String(), jerr)
						}
					}
					return v, errb.String(), err
				}
				must := func(args ...string) map[string]any {
					t.Helper()
					v, stderr, err := cli(secret, args...)
					if err != nil {
						t.Fatalf("aws %v: %v\n%s", args, err, stderr)
					}
					return v
				}
				queue := "cli-" + name
				created := must("sqs", "create-queue", "--queue-name", queue, "--attributes", "VisibilityTimeout=40", "--tags", "team=a")
				u, _ := created["QueueUrl"].(string)
				if !strings.HasSuffix(u, "/000000000000/"+queue) {
					t.Fatalf("create-queue: %v", created)
				}
				if l := must("sqs", "list-queues", "--queue-name-prefix", queue); !slices.Contains(anyStrings(l["QueueUrls"]), u) {
					t.Fatalf("list-queues: %v", l)
				}
				sent := must("sqs", "send-message", "--queue-url", u, "--message-body", "one <&> \"quoted\" €",
					"--message-attributes", `{"colour":{"DataType":"String","StringValue":"red"},"raw":{"DataType":"Binary","BinaryValue":"AAEC"}}`)
				sum := md5.Sum([]byte("one <&> \"quoted\" €"))
				if sent["MessageId"] == nil || sent["MD5OfMessageBody"] != hex.EncodeToString(sum[:]) {
					t.Fatalf("send-message: %v", sent)
				}
				batch := must("sqs", "send-message-batch", "--queue-url", u, "--entries",
					`[{"Id":"a","MessageBody":"two"},{"Id":"b","MessageBody":"three"},{"Id":"c","MessageBody":"four","DelaySeconds":901}]`)
				if len(batch["Successful"].([]any)) != 2 || len(batch["Failed"].([]any)) != 1 {
					t.Fatalf("send-message-batch: %v", batch)
				}
				got := must("sqs", "receive-message", "--queue-url", u, "--max-number-of-messages", "10",
					"--attribute-names", "All", "--message-attribute-names", "All")
				msgs, _ := got["Messages"].([]any)
				var bodies, handles []string
				for _, m := range msgs {
					m := m.(map[string]any)
					bodies = append(bodies, m["Body"].(string))
					handles = append(handles, m["ReceiptHandle"].(string))
					if m["Body"] == "one <&> \"quoted\" €" {
						attrs := m["MessageAttributes"].(map[string]any)
						if attrs["raw"].(map[string]any)["BinaryValue"] != "AAEC" || attrs["colour"].(map[string]any)["StringValue"] != "red" {
							t.Fatalf("message attributes: %v", attrs)
						}
						if m["Attributes"].(map[string]any)["ApproximateReceiveCount"] != "1" {
							t.Fatalf("system attributes: %v", m["Attributes"])
						}
					}
				}
				sort.Strings(bodies)
				if want := []string{"one <&> \"quoted\" €", "three", "two"}; !slices.Equal(bodies, want) {
					t.Fatalf("received %q, want %q", bodies, want)
				}
				must("sqs", "delete-message", "--queue-url", u, "--receipt-handle", handles[0])
				entries, _ := json.Marshal([]map[string]string{{"Id": "x", "ReceiptHandle": handles[1]}, {"Id": "y", "ReceiptHandle": handles[2]}})
				if del := must("sqs", "delete-message-batch", "--queue-url", u, "--entries", string(entries)); len(del["Successful"].([]any)) != 2 {
					t.Fatalf("delete-message-batch: %v", del)
				}
				a := must("sqs", "get-queue-attributes", "--queue-url", u, "--attribute-names", "All")["Attributes"].(map[string]any)
				if a["VisibilityTimeout"] != "40" || a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
					t.Fatalf("get-queue-attributes: %v", a)
				}
				_, stderr, err := cli(secret, "sqs", "get-queue-url", "--queue-name", "missing")
				if err == nil || !strings.Contains(stderr, "AWS.SimpleQueueService.NonExistentQueue") {
					t.Fatalf("get-queue-url of a missing queue: %v %s", err, stderr)
				}
				if signed {
					_, stderr, err := cli("a-wrong-secret-access-key", "sqs", "send-message", "--queue-url", u, "--message-body", "x")
					if err == nil || !strings.Contains(stderr, "SignatureDoesNotMatch") {
						t.Fatalf("send-message with a wrong secret: %v %s", err, stderr)
					}
				}
				s.spoke(t, "CreateQueue", "ListQueues", "SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage",
					"DeleteMessageBatch", "GetQueueAttributes", "GetQueueUrl")
			})
		}
	})
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Every action, through Debian's boto3 (query protocol), against a
// signed server: testdata/boto3_sqs.py checks each answer.
func TestBoto3QueryProtocol(t *testing.T) {
	python := queryClient(t, "Debian's python3-boto3", debianPython, func() error {
		return exec.Command(debianPython, "-c", "import boto3").Run()
	})
	leaseholdBin(t)
	script, err := filepath.Abs(filepath.Join("testdata", "boto3_sqs.py"))
	if err != nil {
		t.Fatal(err)
	}
	queryDatabases(t, func(t *testing.T, db string) {
		const key, secret = "AKIDBOTO3", "secret-access-key-for-boto3"
		s := startQueryServer(t, db, key, secret)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, script)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret, "LEASEHOLD_URL="+s.url,
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("boto3_sqs.py: %v\n%s", err, out)
		}
		s.spoke(t, "CreateQueue", "GetQueueUrl", "ListQueues", "SetQueueAttributes", "GetQueueAttributes", "TagQueue", "UntagQueue",
			"ListQueueTags", "SendMessage", "SendMessageBatch", "ReceiveMessage", "ChangeMessageVisibility",
			"ChangeMessageVisibilityBatch", "DeleteMessage", "DeleteMessageBatch", "PurgeQueue", "DeleteQueue")
	})
}

// celeryPython returns Debian's Python when it has Celery, kombu, boto3
// and pycurl.
func celeryPython(t *testing.T) string {
	return queryClient(t, "Debian's python3-celery, python3-kombu, python3-boto3 and python3-pycurl", debianPython, func() error {
		out, err := exec.Command(debianPython, "-c", "import celery, kombu, boto3, pycurl").CombinedOutput()
		if err != nil {
			return &exec.Error{Name: debianPython, Err: errorString(strings.TrimSpace(string(out)))}
		}
		return nil
	})
}

type errorString string

func (e errorString) Error() string { return string(e) }

// A Celery application whose broker is the server (kombu's SQS
// transport, query protocol, signed): a task sent through it is run by a
// worker, which writes the task's line, and the message is deleted.
func TestCeleryThroughServe(t *testing.T) {
	python := celeryPython(t)
	leaseholdBin(t)
	script, err := filepath.Abs(filepath.Join("testdata", "celery_sqs.py"))
	if err != nil {
		t.Fatal(err)
	}
	queryDatabases(t, func(t *testing.T, db string) {
		const key, secret = "AKIDCELERY", "secret-access-key-for-celery"
		s := startQueryServer(t, db, key, secret)
		dir := t.TempDir()
		out := filepath.Join(dir, "lines")
		env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret,
			"LEASEHOLD_ENDPOINT="+strings.TrimPrefix(s.url, "http://"), "CELERY_OUT="+out,
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		send := exec.CommandContext(ctx, python, script, "send", "line-one")
		send.Dir, send.Env = dir, env
		if b, err := send.CombinedOutput(); err != nil {
			t.Fatalf("send the task: %v\n%s", err, b)
		}
		worker := exec.Command(python, script, "worker")
		worker.Dir, worker.Env = dir, env
		var logs bytes.Buffer
		worker.Stdout, worker.Stderr = &logs, &logs
		if err := worker.Start(); err != nil {
			t.Fatal(err)
		}
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				_ = worker.Process.Signal(syscall.SIGTERM)
				_ = worker.Wait()
			}
		}
		t.Cleanup(stop)
		t.Cleanup(func() {
			if t.Failed() {
				stop()
				t.Logf("the worker's log:\n%s", logs.String())
			}
		})
		waitUntil(t, "the task's line", func() bool {
			b, _ := os.ReadFile(out)
			return string(b) == "line-one\n"
		})
		// The worker acknowledged the task: the queue is empty, nothing
		// in flight.
		waitUntil(t, "the task's message deleted", func() bool {
			a := queueDepth(t, db, "leasehold-celery")
			return a == "pending=0 processing=0"
		})
		stop()
		s.spoke(t, "SendMessage", "ReceiveMessage", "DeleteMessage")
	})
}

// queueDepth is a queue's pending and processing counts, by the command's
// stats.
func queueDepth(t *testing.T, db, queue string) string {
	t.Helper()
	r := runBin(t, t.TempDir(), "", "--db", db, "stats", "--json")
	for _, line := range jsonLines(t, r.stdout) {
		if line["queue"] == queue {
			return "pending=" + jsonNumber(line["pending"]) + " processing=" + jsonNumber(line["processing"])
		}
	}
	return "no line for " + queue + " in " + r.stdout + r.stderr
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
