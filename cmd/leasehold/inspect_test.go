package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/sqlite"
)

// Control characters in user data cannot reach the terminal or break a
// table's columns.
func TestTablesEscapeControlCharacters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "esc.db")
	queue := "q\x1b[31mred\tx"
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", queue, "--key", "k\r\x07", "--max-deliveries", "1", "pay\x1b]0;title\x07").must(t)
	writeScript(t, dir, "printf 'bad\\033[2J\\tinput' >&2; exit 65\n")
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", queue, "--drain", "--", "./handler.sh").must(t)
	for _, args := range [][]string{{"stats"}, {"list", "--queue", queue}, {"dead", "list", "--queue", queue}} {
		out := runBin(t, dir, "", append([]string{"--db", db}, args...)...).must(t).stdout
		if strings.ContainsAny(out, "\x1b\x07\r") {
			t.Fatalf("%v printed control characters:\n%q", args, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.Contains(line, "\t") {
				t.Fatalf("%v printed a tab inside a cell: %q", args, line)
			}
		}
		if args[0] == "stats" && !strings.Contains(out, `q\x1b[31mred\tx`) {
			t.Fatalf("stats does not show the queue name escaped:\n%s", out)
		}
		if args[0] == "list" && !strings.Contains(out, `k\r\a`) {
			t.Fatalf("list does not show the key escaped:\n%s", out)
		}
		if args[0] == "dead" && !strings.Contains(out, `bad\x1b[2J\tinput`) {
			t.Fatalf("dead list does not show the error escaped:\n%s", out)
		}
	}
}

func TestDeadPurgeAndRedriveRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "purge.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "p", "--max-deliveries", "1", "x").must(t)
	handler := writeScript(t, dir, "exit 65\n")
	runBin(t, dir, "", "--db", db, "--log-level", "error", "work", "--queue", "p", "--drain", "--", handler).must(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dead", "purge", "--queue", "p"}, 2, "--all"},
		{[]string{"dead", "purge", "--queue", "p", "--all", "--id", "1"}, 2, "--all and --id"},
		{[]string{"dead", "purge", "--queue", "p", "--id", "1", "--id", "1"}, 2, "--id 1: given twice"},
		{[]string{"dead", "redrive", "--queue", "p", "--id", "1,1"}, 2, "--id 1: given twice"},
		{[]string{"dead", "purge", "--queue", "nope", "--all"}, 1, "queue nope does not exist"},
		{[]string{"dead", "redrive", "--queue", "nope"}, 1, "queue nope does not exist"},
		{[]string{"dead", "list", "--queue", "nope"}, 1, "queue nope does not exist"},
	} {
		r := runBin(t, dir, "", append([]string{"--db", db}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("%v: exit %d, stderr %q; want exit %d and one line naming %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if out := runBin(t, dir, "", "--db", db, "dead", "purge", "--queue", "p", "--all").must(t).stdout; strings.TrimSpace(out) != "purged 1" {
		t.Fatalf("purge --all: %q", out)
	}
}

func TestEnqueueBinarySafePayloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "raw.db")
	bin := []byte("\x00\xff line one\r\nline two\n")
	if err := os.WriteFile(filepath.Join(dir, "payload"), bin, 0o600); err != nil {
		t.Fatal(err)
	}
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "raw", "--file", "payload").must(t)
	runBin(t, dir, string(bin), "--db", db, "enqueue", "--queue", "raw", "--raw").must(t)
	runBin(t, dir, "one\ntwo\x00three\x00", "--db", db, "enqueue", "--queue", "raw", "-0").must(t)
	var got []string
	for _, m := range jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "raw", "--json").must(t).stdout) {
		p := m["payload"].(string)
		if b64, ok := m["payload_base64"].(string); ok {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			p = string(b)
		}
		got = append(got, p)
	}
	want := []string{string(bin), string(bin), "one\ntwo", "three"}
	if !slices.Equal(got, want) {
		t.Fatalf("payloads %q, want %q", got, want)
	}
	for _, args := range [][]string{
		{"--raw", "x"}, {"--raw", "-0"}, {"--file", "payload", "--raw"}, {"--file", "missing"},
	} {
		r := runBin(t, dir, "", append([]string{"--db", db, "enqueue", "--queue", "raw"}, args...)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("enqueue %v: exit %d, stderr %q; want a one-line usage error", args, r.code, r.stderr)
		}
	}
	help := runBin(t, dir, "", "enqueue", "--help").must(t).stdout
	if !strings.Contains(help, "one message per line") {
		t.Fatalf("enqueue --help does not say that plain standard input is a message per line:\n%s", help)
	}
}

// pageRecorder records the most payload bytes one List call returned.
type pageRecorder struct {
	store.Store
	most, calls int
}

func (p *pageRecorder) List(ctx context.Context, f store.ListFilter) ([]store.Info, error) {
	infos, err := p.Store.List(ctx, f)
	n := 0
	for _, in := range infos {
		n += len(in.Payload)
	}
	p.most, p.calls = max(p.most, n), p.calls+1
	return infos, err
}

// A listing holds a bounded number of bytes at once, whatever the number
// of rows and the size of their payloads.
func TestListingPagesAreBoundedInBytes(t *testing.T) {
	ctx := context.Background()
	mem, err := memory.New(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	big := bytes.Repeat([]byte("x"), store.DefaultPayloadLimit)
	var msgs []store.NewMessage
	for range 40 {
		msgs = append(msgs, store.NewMessage{Queue: "q", Payload: big})
	}
	for range 3000 {
		msgs = append(msgs, store.NewMessage{Queue: "q", Payload: []byte("small")})
	}
	for start := 0; start < len(msgs); start += 500 {
		if _, err := mem.Enqueue(ctx, msgs[start:min(start+500, len(msgs))]); err != nil {
			t.Fatal(err)
		}
	}
	rec := &pageRecorder{Store: mem}
	var ids []int64
	n, err := eachMessage(ctx, rec, store.ListFilter{Queue: "q", State: store.Pending, Limit: 2900}, nil, func(in store.Info) error {
		ids = append(ids, in.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2900 || len(ids) != 2900 || ids[0] != 1 || ids[2899] != 2900 {
		t.Fatalf("listed %d messages, ids %d to %d; want 1 to 2900", n, ids[0], ids[len(ids)-1])
	}
	if rec.most > listBudget {
		t.Fatalf("one page held %d payload bytes, over the budget of %d", rec.most, listBudget)
	}
	// Small rows still come in large pages.
	if rec.calls > 10 {
		t.Fatalf("%d pages for 2,900 rows", rec.calls)
	}
}

func TestEnqueueKind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "kind.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "k", "--kind", "send_email", "x").must(t)
	list := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "k", "--json").must(t).stdout)
	if len(list) != 1 || list[0]["kind"] != "send_email" {
		t.Fatalf("listed %v, want one message of kind send_email", list)
	}
	r := runBin(t, dir, "", "--db", db, "enqueue", "--queue", "k", "--kind", strings.Repeat("k", store.MaxNameLength+1), "x")
	if r.code != 2 || !strings.Contains(r.stderr, "kind is") {
		t.Fatalf("a kind over the limit: exit %d, stderr %q", r.code, r.stderr)
	}
}

// list --key and --kind narrow the listing, in every state.
func TestListByKeyAndKind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "filter.db")
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "o", "--key", "a", "--kind", "email", "one").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "o", "--key", "b", "--kind", "sms", "two").must(t)
	runBin(t, dir, "", "--db", db, "enqueue", "--queue", "o", "--key", "a", "--kind", "sms", "three").must(t)
	ids := func(args ...string) []string {
		t.Helper()
		var out []string
		for _, l := range jsonLines(t, runBin(t, dir, "", append([]string{"--db", db, "list", "--queue", "o", "--json"}, args...)...).must(t).stdout) {
			out = append(out, fmt.Sprint(l["id"]))
		}
		return out
	}
	if got := ids("--key", "a"); !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("--key a listed %v, want 1 and 3", got)
	}
	if got := ids("--kind", "sms"); !slices.Equal(got, []string{"2", "3"}) {
		t.Errorf("--kind sms listed %v, want 2 and 3", got)
	}
	if got := ids("--key", "a", "--kind", "sms", "--state", "waiting"); !slices.Equal(got, []string{"3"}) {
		t.Errorf("--key a --kind sms --state waiting listed %v, want 3", got)
	}
}

// list and dead list show a message's SQS message id beside its id for
// the queues of the SQS API, as leasehold serve gives it; other queues'
// listings have none, and reading them makes no secret.
func TestListsShowSQSMessageIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sqs.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	// What a server and the SQS API leave: the secret, a queue's record,
	// a message in it.
	if _, _, err := st.CreateQueue(ctx, "api", nil); err != nil {
		t.Fatal(err)
	}
	ids, err := serve.MessageIDs(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	enq, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "api", Payload: []byte("a"), MaxDeliveries: 5}, {Queue: "go", Payload: []byte("b"), MaxDeliveries: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// A second message of the SQS queue dies.
	if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "api", Payload: []byte("dead"), MaxDeliveries: 1}}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Claim(ctx, store.Claim{Queue: "api", WorkerID: "w", Max: 2, LeaseDuration: time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	if _, err := st.Fail(ctx, store.Failure{Lease: got[1].Lease, Permanent: true, Error: "no"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, store.Release{Lease: got[0].Lease}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	db := "sqlite:" + path
	want := ids.MessageID(enq[0].ID)
	dead := jsonLines(t, runBin(t, dir, "", "--db", db, "dead", "list", "--queue", "api", "--json").must(t).stdout)
	if len(dead) != 1 || dead[0]["sqs_message_id"] != ids.MessageID(got[1].MessageID) {
		t.Fatalf("dead list --json of an SQS queue: %v, want sqs_message_id %s", dead, ids.MessageID(got[1].MessageID))
	}
	list := jsonLines(t, runBin(t, dir, "", "--db", db, "list", "--queue", "api", "--state", "pending", "--json").must(t).stdout)
	if len(list) != 1 || list[0]["sqs_message_id"] != want {
		t.Fatalf("list --json of an SQS queue: %v, want sqs_message_id %s", list, want)
	}
	if out := runBin(t, dir, "", "--db", db, "list", "--queue", "api").must(t); !strings.Contains(out.stdout, "SQS MESSAGE ID") || !strings.Contains(out.stdout, want) || out.stderr != "" {
		t.Fatalf("list of an SQS queue:\n%s\nstderr: %s", out.stdout, out.stderr)
	}
	other := runBin(t, dir, "", "--db", db, "list", "--queue", "go").must(t)
	if strings.Contains(other.stdout, "SQS") || other.stderr != "" {
		t.Fatalf("list of a queue the SQS API does not know:\n%s\nstderr: %s", other.stdout, other.stderr)
	}
}
