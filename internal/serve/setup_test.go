package serve_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

const (
	testKey    = "AKIDLEASEHOLD"
	testSecret = "leasehold-test-secret"
)

// backend opens a store whose time authority is clk; nil is the system
// clock. The SQLite store commits at the synchronous setting that
// LEASEHOLD_TEST_SQLITE_SYNCHRONOUS names, when set (benchmarks compare
// the default with "normal").
type backend struct {
	name string
	open func(t testing.TB, clk clock.Clock) store.Store
}

func backends() []backend {
	return []backend{
		{"sqlite", func(t testing.TB, clk clock.Clock) store.Store {
			st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "q.db"), Clock: clk,
				Synchronous: os.Getenv("LEASEHOLD_TEST_SQLITE_SYNCHRONOUS")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{"postgres", func(t testing.TB, clk clock.Clock) store.Store {
			pool := pgtest.Pool(t)
			st, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool), Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
	}
}

func readOnlyBackends() []readOnly {
	return []readOnly{
		{"sqlite", func(t *testing.T) (store.Store, store.Store) {
			path := filepath.Join(t.TempDir(), "q.db")
			rw, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rw.Close() })
			// The secret exists before the read-only server starts, as
			// it does once any server of the database has run.
			if _, err := rw.ServerSecret(context.Background(), "serve"); err != nil {
				t.Fatal(err)
			}
			ro, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ro.Close() })
			return rw, ro
		}},
		{"postgres", func(t *testing.T) (store.Store, store.Store) {
			pool := pgtest.Pool(t)
			schema := pgtest.Schema(t, pool)
			rw, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rw.Close() })
			if _, err := rw.ServerSecret(context.Background(), "serve"); err != nil {
				t.Fatal(err)
			}
			ro, err := postgres.Open(context.Background(), postgres.Config{Pool: pgtest.ReadOnlyPool(t), Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ro.Close() })
			return rw, ro
		}},
	}
}

// forEachBackend runs test on every backend.
func forEachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// fixture is a server on a fake clock, served by httptest without its
// background loops (tests reap when they want), and an SDK client of it.
type fixture struct {
	t   *testing.T
	ctx context.Context
	clk *clocktest.Clock
	st  store.Store
	srv *serve.Server
	url string
	c   *sqs.Client
}

type options struct {
	signed bool
	// adjust, when set, changes the server's Config before New.
	adjust func(*serve.Config)
}

func setup(t *testing.T, b backend, o options) *fixture {
	t.Helper()
	clk := clocktest.New()
	// Signatures carry the SDK's real time, so the fake clock starts there.
	if err := clk.SetWall(time.Now().UTC().Round(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	st := b.open(t, clk)
	cfg := serve.Config{Store: st, Addr: "127.0.0.1:0", Clock: clk, Logger: slog.New(slog.DiscardHandler)}
	if o.signed {
		cfg.AccessKeyID, cfg.SecretAccessKey = testKey, testSecret
	}
	if o.adjust != nil {
		o.adjust(&cfg)
	}
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	f := &fixture{t: t, ctx: context.Background(), clk: clk, st: st, srv: srv, url: hs.URL}
	f.c = f.client(testKey, testSecret)
	return f
}

// client is an SDK client of the fixture's server with the given
// credentials; an empty key sends unsigned requests. It does not retry,
// so that each call is one request.
func (f *fixture) client(key, secret string) *sqs.Client {
	var creds aws.CredentialsProvider = aws.AnonymousCredentials{}
	if key != "" {
		creds = credentials.NewStaticCredentialsProvider(key, secret, "")
	}
	return sqs.New(sqs.Options{BaseEndpoint: aws.String(f.url), Region: "us-east-1", Credentials: creds,
		RetryMaxAttempts: 1, HTTPClient: &http.Client{}})
}

func (f *fixture) createQueue(name string, attrs map[string]string) string {
	f.t.Helper()
	out, err := f.c.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		f.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return *out.QueueUrl
}

func (f *fixture) send(url, body string, group string) string {
	f.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}
	if group != "" {
		in.MessageGroupId = aws.String(group)
	}
	out, err := f.c.SendMessage(f.ctx, in)
	if err != nil {
		f.t.Fatalf("SendMessage %q: %v", body, err)
	}
	return *out.MessageId
}

// receive takes up to max messages at once, without waiting.
func (f *fixture) receive(url string, max int32, visibility int32) []receivedMsg {
	f.t.Helper()
	out, err := f.c.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: max,
		VisibilityTimeout: visibility, WaitTimeSeconds: 0})
	if err != nil {
		f.t.Fatalf("ReceiveMessage: %v", err)
	}
	var got []receivedMsg
	for _, m := range out.Messages {
		got = append(got, receivedMsg{body: *m.Body, handle: *m.ReceiptHandle, id: *m.MessageId})
	}
	return got
}

type receivedMsg struct{ body, handle, id string }

func bodies(ms []receivedMsg) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.body)
	}
	return out
}

func (f *fixture) delete(url, handle string) error {
	_, err := f.c.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(handle)})
	return err
}

func (f *fixture) attrs(url string) map[string]string {
	f.t.Helper()
	out, err := f.c.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		f.t.Fatalf("GetQueueAttributes: %v", err)
	}
	return out.Attributes
}

// reap runs the reaper once, as the server's reaper would at its next
// run.
func (f *fixture) reap() {
	f.t.Helper()
	if _, err := f.st.Reap(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// wantCode checks that err is an API error with the code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: error %v, want API error %s", what, err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("%s: error code %s (%v), want %s", what, ae.ErrorCode(), err, code)
	}
}
