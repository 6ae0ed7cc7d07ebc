package dashboard_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/dashboard"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
)

type fixture struct {
	t   *testing.T
	ctx context.Context
	clk *clocktest.Clock
	st  store.Store
	d   *dashboard.Dashboard
	url string
	c   *http.Client
}

// setup serves a dashboard of a new store, its Config adjusted by each of
// adjust.
func setup(t *testing.T, adjust ...func(*dashboard.Config)) *fixture {
	t.Helper()
	clk := clocktest.New()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "d.db"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key, err := st.ServerSecret(context.Background(), "dashboard")
	if err != nil {
		t.Fatal(err)
	}
	cfg := dashboard.Config{Store: st, Clock: clk, Logger: slog.New(slog.DiscardHandler), Key: key}
	for _, a := range adjust {
		a(&cfg)
	}
	d, err := dashboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d.Handler())
	t.Cleanup(hs.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &fixture{t: t, ctx: context.Background(), clk: clk, st: st, d: d, url: hs.URL, c: c}
}

func (f *fixture) get(path string) (int, string) {
	f.t.Helper()
	resp, err := f.c.Get(f.url + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (f *fixture) post(path string, form url.Values) (int, string, string) {
	f.t.Helper()
	resp, err := f.c.PostForm(f.url+path, form)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the token of the forms on a page.
func (f *fixture) csrf(page string) string {
	f.t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		f.t.Fatalf("no csrf field on the page")
	}
	return m[1]
}

func (f *fixture) enqueue(msgs ...store.NewMessage) []int64 {
	f.t.Helper()
	res, err := f.st.Enqueue(f.ctx, msgs)
	if err != nil {
		f.t.Fatal(err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func (f *fixture) claim(queue string, n int) []store.Delivery {
	f.t.Helper()
	ds, err := f.st.Claim(f.ctx, store.Claim{Queue: queue, WorkerID: "w", Max: n, LeaseDuration: time.Minute})
	if err != nil {
		f.t.Fatal(err)
	}
	return ds
}

func TestPagesShowEveryState(t *testing.T) {
	f := setup(t)
	evil := "<script>alert(1)</script>"
	f.enqueue(store.NewMessage{Queue: evil, Payload: []byte("<b>payload</b>"), Key: "<i>key</i>"})
	ids := f.enqueue(
		store.NewMessage{Queue: "jobs", Payload: []byte(`{"to":"ann","n":1}`), Key: "k1", Kind: "email"},
		store.NewMessage{Queue: "jobs", Payload: []byte("behind"), Key: "k1"},
		store.NewMessage{Queue: "jobs", Payload: []byte{0, 1, 2, 0xff}, MaxDeliveries: 1},
	)
	ds := f.claim("jobs", 2)
	if len(ds) != 2 {
		t.Fatalf("claimed %d", len(ds))
	}
	if _, err := f.st.Fail(f.ctx, store.Failure{Lease: ds[1].Lease, Error: "boom <x>", Permanent: true}); err != nil {
		t.Fatal(err)
	}

	f.enqueue(store.NewMessage{Queue: "jobs", Payload: []byte("later"), Delay: time.Hour})
	code, page := f.get("/")
	if code != 200 || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(page, evil) {
		t.Fatalf("queues page: %d; the queue name must be escaped:\n%s", code, page)
	}
	if !strings.Contains(page, `href="/queues/jobs"`) || !strings.Contains(page, `data-field="processing">1<`) || !strings.Contains(page, `data-field="delayed"><a href="/queues/jobs/scheduled">1</a><`) {
		t.Fatalf("queues page lacks the jobs row with one processing and one delayed:\n%s", page)
	}
	if _, api := f.get("/api/queues"); !strings.Contains(api, `"Delayed":1`) {
		t.Fatalf("/api/queues lacks the delayed count: %s", api)
	}
	code, page = f.get("/queues/" + url.PathEscape(evil) + "?state=pending")
	if code != 200 || strings.Contains(page, "<i>key</i>") || !strings.Contains(page, "&lt;i&gt;key&lt;/i&gt;") {
		t.Fatalf("queue page of the evil queue: %d\n%s", code, page)
	}
	msg := func(i int) string { return "/queues/jobs/messages/" + strconv.FormatInt(ids[i], 10) }
	code, page = f.get("/queues/jobs?state=processing")
	if code != 200 || !strings.Contains(page, msg(0)) || !strings.Contains(page, "in 1m0s") {
		t.Fatalf("processing messages: %d\n%s", code, page)
	}
	code, page = f.get("/queues/jobs?state=waiting&key=k1")
	if code != 200 || !strings.Contains(page, msg(1)) {
		t.Fatalf("waiting messages of k1: %d\n%s", code, page)
	}
	code, page = f.get(msg(0))
	if code != 200 || !strings.Contains(page, "JSON") || !strings.Contains(page, "&#34;to&#34;: &#34;ann&#34;") {
		t.Fatalf("message page of a JSON payload: %d\n%s", code, page)
	}
	code, page = f.get(msg(2))
	if code != 200 || !strings.Contains(page, "hex") || !strings.Contains(page, "00 01 02 ff") || !strings.Contains(page, "boom &lt;x&gt;") {
		t.Fatalf("message page of a binary dead payload: %d\n%s", code, page)
	}
	// The dead message's error history: its one attempt, escaped.
	if !strings.Contains(page, "Error history") || !regexp.MustCompile(`<td class="num">1</td><td>[^<]+ UTC</td><td>w</td><td class="error"><pre>boom &lt;x&gt;</pre>`).MatchString(page) {
		t.Fatalf("message page without the attempt's error in its history:\n%s", page)
	}
	code, page = f.get("/queues/jobs/keys")
	if code != 200 || !strings.Contains(page, ">k1<") || !strings.Contains(page, "processing") {
		t.Fatalf("keys page: %d\n%s", code, page)
	}
	code, page = f.get("/queues/jobs/dead")
	if code != 200 || !strings.Contains(page, `name="id" value="`+strconv.FormatInt(ids[2], 10)+`"`) || !strings.Contains(page, "permanent_error") {
		t.Fatalf("dead letters page: %d\n%s", code, page)
	}
	if code, _ := f.get("/queues/jobs/dead?reason=lease_expired"); code != 200 {
		t.Fatalf("dead letters by reason: %d", code)
	}
}

func TestBadInputIsNamed(t *testing.T) {
	f := setup(t)
	f.enqueue(store.NewMessage{Queue: "jobs", Payload: []byte("x")})
	for path, want := range map[string]int{
		"/queues/jobs?state=bogus":      400,
		"/queues/jobs/messages/abc":     400,
		"/queues/jobs/messages/999":     404,
		"/queues/other/messages/1":      404,
		"/queues/jobs/dead?reason=nope": 400,
		"/queues/jobs?after=-4":         400,
		"/queues/jobs?id=12x":           400,
	} {
		if code, page := f.get(path); code != want {
			t.Errorf("GET %s = %d, want %d\n%s", path, code, want, page)
		}
	}
	if code, _, _ := f.post("/queues/jobs/resume", nil); code != 403 {
		t.Errorf("POST without a CSRF token = %d, want 403", code)
	}
}

func TestActionsNeedTheirTokenAndConfirmation(t *testing.T) {
	f := setup(t)
	f.enqueue(store.NewMessage{Queue: "jobs", Payload: []byte("a"), MaxDeliveries: 1}, store.NewMessage{Queue: "jobs", Payload: []byte("b"), MaxDeliveries: 1})
	for _, d := range f.claim("jobs", 2) {
		if _, err := f.st.Fail(f.ctx, store.Failure{Lease: d.Lease, Error: "bad"}); err != nil {
			t.Fatal(err)
		}
	}
	_, page := f.get("/")
	token := f.csrf(page)

	// A forged token changes nothing.
	if code, _, _ := f.post("/queues/jobs/pause", url.Values{"csrf": {"forged"}}); code != 403 {
		t.Fatalf("pause with a forged token = %d, want 403", code)
	}
	if st, _ := f.st.Stats(f.ctx, "jobs"); st.Paused {
		t.Fatal("a forged pause paused the queue")
	}
	code, loc, _ := f.post("/queues/jobs/pause", url.Values{"csrf": {token}, "back": {"/"}})
	if st, _ := f.st.Stats(f.ctx, "jobs"); code != 303 || !st.Paused || !strings.Contains(loc, "done=paused+jobs") {
		t.Fatalf("pause = %d %s, paused %v", code, loc, st.Paused)
	}
	// The page after an action says what it did; a link from elsewhere
	// cannot make it say anything.
	if _, page := f.get(loc); !strings.Contains(page, `<p class="flash" role="status">paused jobs</p>`) {
		t.Fatalf("the page after pause does not say so:\n%s", page)
	}
	if _, page := f.get("/?done=purged+everything"); strings.Contains(page, "purged everything") {
		t.Fatal("an unsigned done= is shown as what the dashboard did")
	}
	for _, away := range []string{"https://evil.example/", "//evil.example/", "/\\evil.example/"} {
		code, loc, _ := f.post("/queues/jobs/resume", url.Values{"csrf": {token}, "back": {away}})
		if code != 303 || !strings.HasPrefix(loc, "/?done=") {
			t.Fatalf("resume with back %q = %d %s; want a redirect to this server's /", away, code, loc)
		}
	}

	// Redrive asks first: the confirmation lists the ids and changes
	// nothing; applying it moves them.
	code, _, page = f.post("/queues/jobs/confirm", url.Values{"csrf": {token}, "action": {"redrive"}, "id": {"1", "2"}, "back": {"/queues/jobs/dead"}})
	if code != 200 || !strings.Contains(page, "Redrive 2 message(s)") || !strings.Contains(page, `name="id" value="2"`) {
		t.Fatalf("confirmation: %d\n%s", code, page)
	}
	if st, _ := f.st.Stats(f.ctx, "jobs"); st.Dead != 2 {
		t.Fatalf("the confirmation page redrove: %+v", st)
	}
	code, loc, _ = f.post("/queues/jobs/apply", url.Values{"csrf": {token}, "action": {"redrive"}, "id": {"1"}, "back": {"/queues/jobs/dead"}})
	if st, _ := f.st.Stats(f.ctx, "jobs"); code != 303 || st.Dead != 1 || st.Pending != 1 || !strings.HasPrefix(loc, "/queues/jobs/dead?done=") {
		t.Fatalf("apply = %d %s, stats %+v", code, loc, st)
	}
	code, _, _ = f.post("/queues/jobs/apply", url.Values{"csrf": {token}, "action": {"explode"}, "id": {"2"}})
	if st, _ := f.st.Stats(f.ctx, "jobs"); code != 400 || st.Dead != 1 {
		t.Fatalf("an unknown action = %d, stats %+v", code, st)
	}
	code, _, _ = f.post("/queues/jobs/apply", url.Values{"csrf": {token}, "action": {"purge"}, "id": {"2"}})
	if st, _ := f.st.Stats(f.ctx, "jobs"); code != 303 || st.Dead != 0 {
		t.Fatalf("purge = %d, stats %+v", code, st)
	}
}

// The charts read the throughput the store keeps: completions, failures
// and dead letters per minute, the same on every dashboard of the
// database, a new one included; a queue with none says there is no data
// yet.
func TestThroughputChart(t *testing.T) {
	f := setup(t)
	f.enqueue(store.NewMessage{Queue: "idle", Delay: time.Hour})
	if _, page := f.get("/api/queues"); !strings.Contains(page, `"Last":"no data yet"`) {
		t.Fatalf("a queue without settlements: %s", page)
	}
	if _, page := f.get("/queues/idle"); !strings.Contains(page, "last hour: no data yet") || !strings.Contains(page, "last 24 hours: no data yet") {
		t.Fatalf("the queue page of a queue without settlements does not say there is no data yet:\n%s", page)
	}
	f.enqueue(make5("jobs")...)
	ds := f.claim("jobs", 5)
	cs := make([]store.Completion, 3)
	for i, d := range ds[:3] {
		cs[i] = store.Completion{Lease: d.Lease}
	}
	if _, err := f.st.Complete(f.ctx, cs); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Fail(f.ctx, store.Failure{Lease: ds[3].Lease, Error: "again"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Fail(f.ctx, store.Failure{Lease: ds[4].Lease, Error: "never", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	// The minute is not whole yet: the figure is the last whole one's.
	if _, page := f.get("/api/queues"); !strings.Contains(page, `"Last":"0/min"`) {
		t.Fatalf("the chart during the minute: %s", page)
	}
	f.clk.Advance(time.Minute)
	_, page := f.get("/api/queues")
	if !strings.Contains(page, `"Last":"3/min"`) || !strings.Contains(page, "in the last hour: 3 completed, 1 failed, 1 dead") {
		t.Fatalf("the chart a minute on: %s", page)
	}
	// Another dashboard of the database, started now, draws the same.
	other, err := dashboard.New(dashboard.Config{Store: f.st, Clock: f.clk, Logger: slog.New(slog.DiscardHandler), Key: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	other.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/queues", nil))
	if rec.Body.String() != page {
		t.Fatalf("another dashboard's chart:\n%s\nwant\n%s", rec.Body.String(), page)
	}
	if _, page := f.get("/queues/jobs"); !strings.Contains(page, "last hour: 3 completed, 1 failed, 1 dead") ||
		!strings.Contains(page, "last 24 hours: 3 completed, 1 failed, 1 dead") || !strings.Contains(page, `<path class="failed" d="M0.0 `) {
		t.Fatalf("the queue page's charts:\n%s", page)
	}
}

func make5(queue string) []store.NewMessage {
	msgs := make([]store.NewMessage, 5)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: queue, Payload: []byte("m")}
	}
	return msgs
}

var nextLink = regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
var prevLink = regexp.MustCompile(`<a href="([^"]+)" rel="prev">`)
var idLink = regexp.MustCompile(`<th scope="row"><a href="/queues/jobs/messages/(\d+)">`)

// A listing pages by id both ways, in ascending ids on every page.
func TestPaging(t *testing.T) {
	f := setup(t)
	msgs := make([]store.NewMessage, 120)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: "jobs", Payload: []byte("m")}
	}
	ids := f.enqueue(msgs...)
	page := func(path string) ([]string, string, string) {
		t.Helper()
		code, body := f.get(path)
		if code != 200 {
			t.Fatalf("GET %s = %d", path, code)
		}
		var got []string
		for _, m := range idLink.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		link := func(re *regexp.Regexp) string {
			if m := re.FindStringSubmatch(body); m != nil {
				return strings.ReplaceAll(m[1], "&amp;", "&")
			}
			return ""
		}
		return got, link(prevLink), link(nextLink)
	}
	id := func(i int) string { return strconv.FormatInt(ids[i], 10) }
	first, prev, next := page("/queues/jobs")
	if len(first) != 50 || first[0] != id(0) || prev != "" || next == "" {
		t.Fatalf("first page: %v, prev %q, next %q", first, prev, next)
	}
	second, prev, next := page(next)
	if len(second) != 50 || second[0] != id(50) || prev == "" || next == "" {
		t.Fatalf("second page: %v, prev %q, next %q", second, prev, next)
	}
	third, _, last := page(next)
	if len(third) != 20 || third[19] != id(119) || last != "" {
		t.Fatalf("third page: %v, next %q", third, last)
	}
	back, prev, _ := page(prev)
	if len(back) != 50 || back[0] != id(0) || back[49] != id(49) || prev != "" {
		t.Fatalf("back to the first page: %v, prev %q", back, prev)
	}
}
