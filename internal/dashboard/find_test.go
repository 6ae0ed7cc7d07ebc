package dashboard_test

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/store"
)

var scheduledRow = regexp.MustCompile(`<th scope="row"><a href="/queues/jobs/messages/(\d+)">\d+</a></th><td>(runs in [^<]+)</td>`)

// The scheduled page lists a queue's delayed messages, soonest first,
// each with when it runs, a page at a time; a visible message, another
// queue's and a bad page position are not listed.
func TestScheduledPage(t *testing.T) {
	f := setup(t)
	ids := f.enqueue(
		store.NewMessage{Queue: "jobs", Payload: []byte("later"), Delay: 4*time.Minute + 10*time.Second, Key: "<b>k</b>"},
		store.NewMessage{Queue: "jobs", Payload: []byte("soon"), Delay: 30 * time.Second, Priority: -3},
		store.NewMessage{Queue: "jobs", Payload: []byte("now")},
		store.NewMessage{Queue: "other", Payload: []byte("elsewhere"), Delay: time.Second},
	)
	code, page := f.get("/queues/jobs/scheduled")
	if code != 200 {
		t.Fatalf("GET scheduled = %d:\n%s", code, page)
	}
	rows := scheduledRow.FindAllStringSubmatch(page, -1)
	if len(rows) != 2 || rows[0][1] != fmt.Sprint(ids[1]) || rows[0][2] != "runs in 30s" || rows[1][1] != fmt.Sprint(ids[0]) || rows[1][2] != "runs in 4m 10s" {
		t.Fatalf("scheduled rows = %q, want %d in 30s then %d in 4m 10s:\n%s", rows, ids[1], ids[0], page)
	}
	if !strings.Contains(page, "&lt;b&gt;k&lt;/b&gt;") || strings.Contains(page, "<b>k</b>") {
		t.Fatalf("the key is not escaped:\n%s", page)
	}
	// A page of 50, then the rest.
	msgs := make([]store.NewMessage, 60)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: "jobs", Payload: []byte("m"), Delay: time.Hour + time.Duration(i)*time.Second}
	}
	f.enqueue(msgs...)
	_, page = f.get("/queues/jobs/scheduled")
	m := nextLink.FindStringSubmatch(page)
	if n := len(scheduledRow.FindAllString(page, -1)); n != 50 || m == nil {
		t.Fatalf("first page: %d rows, next link %v", n, m)
	}
	code, page = f.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	rows = scheduledRow.FindAllStringSubmatch(page, -1)
	if code != 200 || len(rows) != 12 || rows[11][2] != "runs in 1h 0m 59s" || nextLink.MatchString(page) {
		t.Fatalf("second page: %d, %d rows (%q)", code, len(rows), rows)
	}
	for _, bad := range []string{"?after=x", "?after=3&at=soon", "?after=-1&at=0"} {
		if code, _ := f.get("/queues/jobs/scheduled" + bad); code != 400 {
			t.Errorf("GET scheduled%s = %d, want 400", bad, code)
		}
	}
	// Time passes: what has become visible leaves the list.
	f.clk.Advance(time.Minute)
	_, page = f.get("/queues/jobs/scheduled")
	if rows := scheduledRow.FindAllStringSubmatch(page, -1); len(rows) == 0 || rows[0][1] != fmt.Sprint(ids[0]) || rows[0][2] != "runs in 3m 10s" {
		t.Fatalf("a minute on, the first row = %q", rows[:min(len(rows), 1)])
	}
}

var searchRow = regexp.MustCompile(`<th scope="row"><a href="([^"]+)">(\d+)</a></th><td>(id|key|kind)</td>`)

// The search box finds a message by id in any queue, and by key and kind
// in the queue it names, or in every queue while there are few, each
// linked to its page; text it cannot take is
// refused with the reason, and everything it shows is escaped.
func TestSearch(t *testing.T) {
	f := setup(t)
	evil := "<script>alert(1)</script>"
	ids := f.enqueue(
		store.NewMessage{Queue: "jobs", Payload: []byte("a"), Key: "order-7", Kind: "email"},
		store.NewMessage{Queue: "jobs", Payload: []byte("b"), Kind: "order-7"},
		store.NewMessage{Queue: "jobs", Payload: []byte("c"), Kind: evil},
		store.NewMessage{Queue: evil, Payload: []byte("d"), Key: "order-7"},
	)
	ds := f.claim("jobs", 1)
	if _, err := f.st.Complete(f.ctx, []store.Completion{{Lease: ds[0].Lease}}); err != nil {
		t.Fatal(err)
	}
	found := func(path string) [][]string {
		t.Helper()
		code, page := f.get(path)
		if code != 200 {
			t.Fatalf("GET %s = %d:\n%s", path, code, page)
		}
		var out [][]string
		for _, m := range searchRow.FindAllStringSubmatch(page, -1) {
			out = append(out, m[1:])
		}
		return out
	}
	// By id, in any queue: the hostile queue's message links to its page.
	got := found(fmt.Sprintf("/search?q=%d", ids[3]))
	if len(got) != 1 || got[0][0] != "/queues/%3Cscript%3Ealert%281%29%3C%2Fscript%3E/messages/"+fmt.Sprint(ids[3]) || got[0][2] != "id" {
		t.Fatalf("search by id = %q", got)
	}
	// By key and kind in a queue: the completed one by key, the other by
	// kind; the other queue's message of the key is not found.
	got = found("/search?q=order-7&queue=jobs")
	if len(got) != 2 || got[0][1] != fmt.Sprint(ids[0]) || got[0][2] != "key" || got[1][1] != fmt.Sprint(ids[1]) || got[1][2] != "kind" {
		t.Fatalf("search by key and kind = %q", got)
	}
	// Without a queue, in every queue while there are few: the other
	// queue's message of the key too.
	got = found("/search?q=order-7")
	// Keys first, queue by queue in name order, then kinds.
	if len(got) != 3 || got[0][1] != fmt.Sprint(ids[3]) || got[1][1] != fmt.Sprint(ids[0]) || got[1][2] != "key" || got[2][1] != fmt.Sprint(ids[1]) {
		t.Fatalf("search by key and kind in every queue = %q", got)
	}
	// With more queues than a search reads, it asks for one.
	for i := range 21 {
		f.enqueue(store.NewMessage{Queue: fmt.Sprintf("q%02d", i), Payload: []byte("e"), Key: "order-7"})
	}
	if _, page := f.get("/search?q=order-7"); !strings.Contains(page, "name their queue") || len(searchRow.FindAllString(page, -1)) != 0 {
		t.Fatalf("a search by text among many queues does not ask for one:\n%s", page)
	}
	// Hostile text is escaped in the results, the title and the box.
	code, page := f.get("/search?q=" + url.QueryEscape(evil) + "&queue=jobs")
	if code != 200 || strings.Contains(page, evil) || !strings.Contains(page, `value="&lt;script&gt;alert(1)&lt;/script&gt;"`) ||
		len(searchRow.FindAllString(page, -1)) != 1 {
		t.Fatalf("search of hostile text = %d:\n%s", code, page)
	}
	for _, bad := range []string{"/search", "/search?q=+", "/search?q=" + strings.Repeat("x", store.MaxNameLength+1), "/search?q=a%00b&queue=jobs"} {
		if code, _ := f.get(bad); code != 400 {
			t.Errorf("GET %s = %d, want 400", bad, code)
		}
	}
	if got := found("/search?q=999999"); len(got) != 0 {
		t.Fatalf("search of an unknown id = %q", got)
	}
}

// A message page shows the job's metadata, escaped, with the trace id of
// its traceparent, when a delayed message runs, and how often it was
// snoozed.
func TestMessageMetadata(t *testing.T) {
	f := setup(t)
	attrs, err := jobmeta.Encode(map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "<b>acme</b>"})
	if err != nil {
		t.Fatal(err)
	}
	id := f.enqueue(store.NewMessage{Queue: "jobs", Payload: []byte("x"), Attributes: attrs, Delay: 90 * time.Second})[0]
	code, page := f.get(fmt.Sprintf("/queues/jobs/messages/%d", id))
	if code != 200 || !strings.Contains(page, `<th scope="row">tenant</th><td><pre>&lt;b&gt;acme&lt;/b&gt;</pre></td>`) ||
		!strings.Contains(page, `<code class="trace">4bf92f3577b34da6a3ce929d0e0e4736</code>`) || !strings.Contains(page, "(runs in 1m 30s)") {
		t.Fatalf("message page = %d:\n%s", code, page)
	}
	if !strings.Contains(page, "<dt>Snoozed</dt><dd>never</dd>") {
		t.Fatalf("a message never snoozed:\n%s", page)
	}
	f.clk.Advance(90 * time.Second)
	for range 2 {
		d := f.claim("jobs", 1)[0]
		if err := f.st.Release(f.ctx, store.Release{Lease: d.Lease, Uncount: true, Snooze: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, page = f.get(fmt.Sprintf("/queues/jobs/messages/%d", id)); !strings.Contains(page, "<dt>Snoozed</dt><dd>2 times</dd>") {
		t.Fatalf("a message snoozed twice:\n%s", page)
	}
}
