package serve_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
)

// laterQueue holds the browser test's delayed messages.
const laterQueue = "later"

// signIn signs the tab in through the login form, and the tab's link
// checker through the same form.
func signIn(t *testing.T, b *tab) {
	t.Helper()
	b.open("/")
	b.load("sign in", chromedp.SendKeys(chromedp.CSS("#password"), browserPassword),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type="submit"]`)))
	c, code := login(t, b.base, browserPassword)
	if code != http.StatusSeeOther {
		t.Fatalf("the link checker's sign-in = %d", code)
	}
	c.Timeout = 10 * time.Second
	b.http = c
}

// The throughput charts, the scheduled messages, the search box and a
// message's metadata, in the browser: each page has names for its
// controls and no id twice (checked on every load), shows markup as text
// and runs no script of the data.
func TestDashboardViewsInBrowser(t *testing.T) {
	testproc.SkipShort(t, "drives headless Chromium")
	exe := chromium(t)
	for _, bk := range backends() {
		t.Run(bk.name, func(t *testing.T) {
			st := bk.open(t, nil)
			s := seed(t, st)
			ctx := context.Background()
			attrs, err := jobmeta.Encode(map[string]string{
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"tenant":      `<img src=x onerror="alert(3)">`,
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := st.Enqueue(ctx, []store.NewMessage{
				{Queue: laterQueue, Payload: []byte("in an hour"), Delay: time.Hour, Kind: "report", Attributes: attrs},
				{Queue: laterQueue, Payload: []byte("in ten minutes"), Delay: 10 * time.Minute, Key: scriptQueue, Kind: "report"},
				{Queue: laterQueue, Payload: []byte("now"), Kind: scriptQueue},
			})
			if err != nil {
				t.Fatal(err)
			}
			inHour, inTen, now := res[0].ID, res[1].ID, res[2].ID
			base := startServer(t, st)
			b := newTab(t, exe, base)
			signIn(t, b)

			// The queues page: each queue's chart has its three lines; the
			// orders queue's counted one completion and two dead letters in
			// the hour, the later queue nothing yet.
			b.open("/")
			label := jsValue[string](b, `document.querySelector(`+js(row(ordersQueue)+` svg.chart`)+`).getAttribute("aria-label")`)
			if !strings.Contains(label, "in the last hour: 1 completed, 0 failed, 2 dead") {
				t.Errorf("the orders chart says %q", label)
			}
			if n := jsValue[int](b, `document.querySelectorAll(`+js(row(ordersQueue)+` svg.chart path`)+`).length`); n != 3 {
				t.Errorf("the orders chart has %d lines, want 3", n)
			}
			if got := b.textOf(row(laterQueue) + ` .rate`); got != "no data yet" {
				t.Errorf("the later queue's chart says %q, want no data yet", got)
			}
			// The queue page's charts, in words.
			b.click(row(ordersQueue) + " th a")
			captions := jsValue[[]string](b, `[...document.querySelectorAll("figure.throughput figcaption")].map(c => c.textContent)`)
			if len(captions) != 2 || captions[0] != "last hour: 1 completed, 0 failed, 2 dead" || captions[1] != "last 24 hours: 1 completed, 0 failed, 2 dead" {
				t.Errorf("the orders queue's charts say %q", captions)
			}

			// The scheduled messages, by the delayed count's link: the one in
			// ten minutes first, each with when it runs; the key that is
			// markup shows as text.
			b.click(`header nav a[href="/"]`)
			b.click(row(laterQueue) + ` [data-field="delayed"] a`)
			if got := b.path(); got != "/queues/"+laterQueue+"/scheduled" {
				t.Fatalf("the delayed count led to %s", got)
			}
			rows := jsValue[[][]string](b, `[...document.querySelectorAll("table tbody tr")].map(r => [...r.cells].map(c => c.textContent.trim()))`)
			runsIn := regexp.MustCompile(`^runs in \d+m \d+s$`)
			if len(rows) != 2 || rows[0][0] != strconv.FormatInt(inTen, 10) || rows[1][0] != strconv.FormatInt(inHour, 10) ||
				!runsIn.MatchString(rows[0][1]) || !strings.HasPrefix(rows[0][1], "runs in 9m") && !strings.HasPrefix(rows[0][1], "runs in 10m") ||
				rows[0][3] != scriptQueue {
				t.Errorf("the scheduled messages: %q, want %d (in about ten minutes, key %s) then %d", rows, inTen, scriptQueue, inHour)
			}
			b.noProblems("the scheduled page")

			// The search box: an id finds its message in any queue (here an
			// orders message, from the later queue's page), linked to its
			// page.
			b.do("type an id", chromedp.SendKeys(chromedp.CSS("#search-q"), strconv.FormatInt(s.json, 10)))
			b.click(`form.search button[type="submit"]`)
			found := jsValue[[]string](b, `[...document.querySelectorAll("table tbody th a")].map(a => a.getAttribute("href"))`)
			if want := fmt.Sprintf("/queues/%s/messages/%d", ordersQueue, s.json); len(found) != 1 || found[0] != want {
				t.Fatalf("the search by id found %q, want %s", found, want)
			}
			b.click(`table tbody th a`)
			if got, want := b.textOf("h1"), fmt.Sprintf("Message %d", s.json); got != want {
				t.Errorf("the result led to %q, want %q", got, want)
			}

			// A message's page shows its metadata as text, and its trace.
			b.open(fmt.Sprintf("/queues/%s/messages/%d", laterQueue, inHour))
			if got := b.textOf("code.trace"); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("the trace id reads %q", got)
			}
			meta := jsValue[[][]string](b, `[...document.querySelectorAll("table:has(caption) tbody tr")].filter(r => r.closest("table").caption.textContent.includes("metadata")).map(r => [...r.cells].map(c => c.textContent))`)
			if len(meta) != 2 || meta[0][0] != "tenant" || meta[0][1] != `<img src=x onerror="alert(3)">` || meta[1][0] != "traceparent" {
				t.Errorf("the metadata reads %q", meta)
			}
			if got := b.textOf("dl.attrs"); !strings.Contains(got, "runs in ") {
				t.Errorf("the message's facts do not say when it runs: %q", got)
			}
			b.noProblems("the message's metadata")

			// On a queue's page the box searches that queue: a kind that is
			// markup finds its message, shown as text; the box keeps the text.
			b.open("/queues/" + laterQueue)
			if got := jsValue[string](b, `document.querySelector("#search-queue").value`); got != laterQueue {
				t.Errorf("the search box's queue on the later queue's page is %q", got)
			}
			b.do("type markup", chromedp.SendKeys(chromedp.CSS("#search-q"), scriptQueue))
			b.click(`form.search button[type="submit"]`)
			results := jsValue[[][]string](b, `[...document.querySelectorAll("table tbody tr")].map(r => [...r.cells].map(c => c.textContent.trim()))`)
			if len(results) != 2 || results[0][0] != strconv.FormatInt(inTen, 10) || results[0][1] != "key" ||
				results[1][0] != strconv.FormatInt(now, 10) || results[1][1] != "kind" || results[1][5] != scriptQueue {
				t.Errorf("the search of %s in %s found %q, want %d by key and %d by kind", scriptQueue, laterQueue, results, inTen, now)
			}
			if got := jsValue[string](b, `document.querySelector("#search-q").value`); got != scriptQueue {
				t.Errorf("the search box holds %q after the search", got)
			}
			if got := b.textOf("h1 .name"); got != scriptQueue {
				t.Errorf("the results' heading names %q", got)
			}
			// A key of the orders queue: the box finds its messages, state by
			// state (waiting before processing).
			b.open("/search?" + "q=customer-7&queue=" + ordersQueue)
			keyed := jsValue[[]string](b, `[...document.querySelectorAll("table tbody th a")].map(a => a.textContent)`)
			if want := []string{strconv.FormatInt(s.waiting1, 10), strconv.FormatInt(s.waiting2, 10), strconv.FormatInt(s.head, 10)}; strings.Join(keyed, ",") != strings.Join(want, ",") {
				t.Errorf("the search by key found %v, want %v", keyed, want)
			}
			b.noProblems("the search")
		})
	}
}
