package serve_test

// The README's screenshots (docs/images) are taken of the demo scene, the
// one `leasehold demo --serve` shows. To take them again, from the
// repository's root:
//
//	LEASEHOLD_TEST_BROWSER=1 LEASEHOLD_SCREENSHOTS=$PWD/docs/images go test -count=1 -run TestDashboardSceneInBrowser ./internal/serve/
//
// It takes a quarter of a minute: the scene's hour of history gives the
// throughput charts their lines at once. Without LEASEHOLD_SCREENSHOTS
// the test takes the screenshots all the same, into a temporary
// directory. Beside them
// it drives every page by keyboard: each control is reached with Tab and
// shows where the focus is, and the actions work with Enter and Space.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/demoscene"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
)

// fillFrom: with the scene's hour of history, the busiest queue's chart
// line starts at x = fillFrom or further left (in a box 120 wide, the
// newest minute on the right).
const fillFrom = 72.0

func TestDashboardSceneInBrowser(t *testing.T) {
	testproc.SkipShort(t, "drives headless Chromium")
	exe := chromium(t)
	// SQLite, as demo --serve, on the system clock, with the scene's
	// hour of history.
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "scene.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sc, err := demoscene.Start(ctx, demoscene.Config{Store: st, Past: func(ctx context.Context, clk clock.Clock) (store.Store, error) {
		return sqlite.Open(ctx, sqlite.Config{Path: path, Clock: clk})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sc.Stop(ctx); err != nil {
			t.Errorf("stop the scene: %v", err)
		}
	})
	base := startServer(t, st)
	c, code := login(t, base, browserPassword)
	if code != http.StatusSeeOther {
		t.Fatalf("sign-in = %d", code)
	}
	c.Timeout = 10 * time.Second
	// The charts show the scene's hour of history before the browser
	// starts.
	requireCharts(t, c, base)
	dead := sc.DeadLetters[0]
	deadPage := fmt.Sprintf("/queues/%s/messages/%d", demoscene.Webhooks, dead)

	t.Run("screenshots", func(t *testing.T) {
		b := newTab(t, exe, base)
		b.publish = true
		b.signIn(c)

		b.open("/")
		b.waitFor("app.js", `document.readyState === "complete"`, 5*time.Second)
		if got := b.textOf(row(demoscene.Thumbnails) + ` [data-field="status"]`); got != "paused" {
			t.Errorf("%s's status on the queues page: %q", demoscene.Thumbnails, got)
		}
		b.shot("queues")

		b.click(row(demoscene.Payments) + " th a")
		wantCounts(t, "the payments page", b.counts(), map[string]int64{"waiting": demoscene.LaneWaiting, "blocked keys": 1})
		// The completed payments fill the page with keys and kinds.
		b.open("/queues/" + demoscene.Payments + "?state=completed")
		b.shot("queue")

		b.open(deadPage)
		history := jsValue[[]string](b, `[...document.querySelectorAll("table tbody tr td.error")].map(td => td.textContent)`)
		if len(history) != demoscene.DeadErrors || !strings.Contains(history[0], "connection refused") {
			t.Errorf("the dead letter's error history reads %q, want %d errors, the newest first", history, demoscene.DeadErrors)
		}
		// The history is in sight in the screenshot.
		jsValue[chromedp.Void](b, `(t => { if (t.getBoundingClientRect().bottom > innerHeight) t.scrollIntoView({block: "end"}) })(document.querySelector("h2 + table"))`)
		b.shot("message")

		b.open("/queues/" + demoscene.Payments)
		b.click(`a[href="/queues/` + demoscene.Payments + `/keys"]`)
		if got := b.textOf("table tbody th a"); got != demoscene.LaneKey {
			t.Errorf("the keys page lists %q first, want %s", got, demoscene.LaneKey)
		}
		b.shot("keys")

		b.open("/queues/" + demoscene.Webhooks + "/dead")
		for _, id := range sc.DeadLetters[:2] {
			b.do("tick a dead letter", chromedp.Click(chromedp.CSS(fmt.Sprintf("#pick-%d", id))))
		}
		b.shot("dead")
		b.click(`button[name="action"][value="redrive"]`)
		if got := jsValue[[]string](b, `[...document.querySelectorAll("ul.ids li")].map(li => li.textContent)`); len(got) != 2 {
			t.Errorf("the confirmation lists %q, want the two ticked", got)
		}
		b.shot("confirm")
	})

	t.Run("keyboard", func(t *testing.T) {
		b := newTab(t, exe, base)
		// Sign in by keyboard: the password has the focus, Enter sends it.
		b.open("/")
		b.keyboard("the login page")
		b.load("sign in with Enter", chromedp.Click(chromedp.CSS("#password")),
			chromedp.KeyEvent(browserPassword), chromedp.KeyEvent(kb.Enter))
		if got := b.path(); got != "/" {
			t.Fatalf("signing in with Enter led to %s", got)
		}
		b.http = c

		// The queues page: resume the paused queue with Enter, pause it
		// again with Space.
		b.keyboard("the queues page")
		pause := row(demoscene.Thumbnails) + ` form button[type="submit"]`
		b.press("Enter", pause, kb.Enter)
		if got := b.textOf(".flash"); got != "resumed "+demoscene.Thumbnails {
			t.Errorf("Enter on Resume says %q", got)
		}
		b.press("Space", pause, " ")
		if got := b.textOf(".flash"); got != "paused "+demoscene.Thumbnails {
			t.Errorf("Space on Pause says %q", got)
		}

		// A queue's page: a link followed with Enter, a filter chosen
		// with the arrow keys, a message opened by its id.
		b.press("Enter", row(demoscene.Payments)+" th a", kb.Enter)
		b.keyboard("a queue's page")
		b.tabTo("#state")
		b.do("choose a state", chromedp.KeyEvent(kb.ArrowDown))
		b.press("Enter", `form:has(#state) button[type="submit"]`, kb.Enter)
		if got := b.path(); !strings.Contains(got, "state=waiting") {
			t.Errorf("the state filter by keyboard led to %s, want the waiting messages", got)
		}
		b.keyboard("a queue's waiting messages")
		b.tabTo("#id")
		b.load("open a message by its id", chromedp.KeyEvent(strconv.FormatInt(sc.LaneWaiters[0], 10)), chromedp.KeyEvent(kb.Enter))
		if got, want := b.path(), fmt.Sprintf("/queues/%s/messages/%d", demoscene.Payments, sc.LaneWaiters[0]); got != want {
			t.Errorf("the id form by keyboard led to %s, want %s", got, want)
		}

		// A waiting message's Cancel… leads to its confirmation, whose
		// No goes back.
		b.keyboard("a waiting message's page")
		b.press("Enter", `main form[action$="/confirm"] button`, kb.Enter)
		if got := b.path(); got != "/queues/"+demoscene.Payments+"/confirm" {
			t.Errorf("Cancel… by keyboard led to %s", got)
		}
		b.keyboard("the confirmation")
		b.press("Enter", `.links a`, kb.Enter)

		b.open("/queues/" + demoscene.Payments + "/keys")
		b.keyboard("the keys page")

		// The dead letters: one ticked with Space, redriven by Enter up
		// to the confirmation, and back.
		b.open(deadPage)
		b.keyboard("a dead letter's page")
		b.open("/queues/" + demoscene.Webhooks + "/dead")
		b.keyboard("the dead letters")
		pick := fmt.Sprintf("#pick-%d", dead)
		b.tabTo(pick)
		b.do("tick with Space", chromedp.KeyEvent(" "))
		if !jsValue[bool](b, `document.querySelector(`+js(pick)+`).checked`) {
			t.Errorf("Space did not tick %s", pick)
		}
		b.press("Enter", `button[name="action"][value="redrive"]`, kb.Enter)
		if got := jsValue[[]string](b, `[...document.querySelectorAll("ul.ids li")].map(li => li.textContent)`); len(got) != 1 || got[0] != strconv.FormatInt(dead, 10) {
			t.Errorf("the confirmation lists %q, want [%d]", got, dead)
		}
		b.keyboard("the redrive's confirmation")
		b.press("Enter", `.links a`, kb.Enter)
		b.tabTo("#reason")
		b.do("choose a reason", chromedp.KeyEvent(kb.ArrowDown))
		b.press("Enter", `form:has(#reason) button[type="submit"]`, kb.Enter)
		if got := b.path(); !strings.Contains(got, "reason=") || strings.HasSuffix(got, "reason=") {
			t.Errorf("the reason filter by keyboard led to %s", got)
		}
		b.keyboard("the dead letters of a reason")

		// The search box, by keyboard, on the queues page (a queue's page
		// names its queue in the box): a key typed and sent with Enter
		// finds the lane's messages in every queue; and the scheduled
		// messages' page.
		b.open("/")
		b.tabTo("#search-q")
		b.load("search by keyboard", chromedp.KeyEvent(demoscene.LaneKey), chromedp.KeyEvent(kb.Enter))
		if got := b.path(); !strings.HasPrefix(got, "/search?") {
			t.Errorf("the search box by keyboard led to %s", got)
		}
		if n := jsValue[int](b, `document.querySelectorAll("main tbody tr").length`); n < 1+demoscene.LaneWaiting {
			t.Errorf("the search for %s found %d messages, want the lane's %d at least", demoscene.LaneKey, n, 1+demoscene.LaneWaiting)
		}
		b.keyboard("the search results")
		b.open("/queues/" + demoscene.Reports + "/scheduled")
		b.keyboard("the scheduled messages")

		// A page that is not there says so, and its way back works too.
		b.loadStatus("open a missing message", http.StatusNotFound, chromedp.Navigate(base+"/queues/"+demoscene.Webhooks+"/messages/999999999"))
		b.keyboard("the error page")
		b.press("Enter", `main a[href="/"]`, kb.Enter)

		// A dead letter redriven from its page, confirmed with Space;
		// then signing out with Enter.
		b.open(deadPage)
		b.press("Enter", `main form[action$="/confirm"]:has(input[value="redrive"]) button`, kb.Enter)
		b.press("Space", `form[action$="/apply"] button`, " ")
		if got, want := b.textOf(".flash"), "redrove 1 of 1 message(s) in "+demoscene.Webhooks; got != want {
			t.Errorf("the redrive by keyboard says %q, want %q", got, want)
		}
		b.press("Enter", `form.logout button`, kb.Enter)
		if got := b.path(); got != "/login" {
			t.Errorf("signing out with Enter led to %s", got)
		}
	})
}

// chartPaths are the path data of the queues' charts (the first line of
// each, the completions), read from the queues page as it is served.
func chartPaths(t *testing.T, c *http.Client, base string) map[string]string {
	t.Helper()
	resp, err := c.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d, %v", resp.StatusCode, err)
	}
	out := map[string]string{}
	for _, m := range chartPath.FindAllStringSubmatch(string(page), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// chartPath finds a queue's row and the path data of its chart's first
// line.
var chartPath = regexp.MustCompile(`(?s)<tr data-queue="([^"]*)">.*?<svg class="chart".*?<path[^>]* d="([^"]*)"`)

// requireCharts fails t unless the three queues with traffic have a
// line of a few minutes in their throughput charts, and the busiest one's
// starts at fillFrom or further left: the database's counts of the
// scene's hour of history, there as soon as the scene is set.
func requireCharts(t *testing.T, c *http.Client, base string) {
	t.Helper()
	paths := chartPaths(t, c, base)
	for _, q := range []string{demoscene.Emails, demoscene.Payments, demoscene.Webhooks} {
		if strings.Count(paths[q], "L") < 3 {
			t.Fatalf("queue %s's chart draws no line: %q", q, paths[q])
		}
	}
	var from float64
	if _, err := fmt.Sscanf(paths[demoscene.Emails], "M%f", &from); err != nil || from > fillFrom {
		t.Fatalf("queue %s's chart starts at %v (%v), want at %v or further left: %q", demoscene.Emails, from, err, fillFrom, paths[demoscene.Emails])
	}
}

// signIn signs the tab in through the login page, and gives its link
// checker the session of c.
func (b *tab) signIn(c *http.Client) {
	b.t.Helper()
	b.open("/")
	b.load("sign in", chromedp.SendKeys(chromedp.CSS("#password"), browserPassword),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type="submit"]`)))
	b.http = c
}

// focusables lists the page's controls that Tab should reach, each named
// so that the page's live update does not rename it: a link in a live
// cell by its cell and row, any other control by its text.
const focusables = `[...document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]")]
	.filter(e => !e.disabled && e.tabIndex >= 0 && e.getClientRects().length > 0)`

const focusName = `(e => [e.tagName, e.id, e.getAttribute("name"), e.getAttribute("value"), e.getAttribute("href"),
	e.closest("[data-field]") ? e.closest("[data-field]").dataset.field + "@" + e.closest("[data-queue]")?.dataset.queue : e.textContent.trim()].join("|"))`

// focused is the element that has the focus, as the keyboard check sees
// it.
type focused struct {
	Name    string
	HTML    string
	Visible bool
	Style   string
	Width   float64
}

const focusedJS = `(e => e && e !== document.body && e !== document.documentElement ? {Name: ` + focusName + `(e),
	HTML: e.outerHTML.slice(0, 160), Visible: e.matches(":focus-visible"), Style: getComputedStyle(e).outlineStyle,
	Width: parseFloat(getComputedStyle(e).outlineWidth)} : null)(document.activeElement)`

// tabFocus presses Tab and returns what has the focus then: nil when it
// left the page. It fails the test when the focus does not show.
func (b *tab) tabFocus(what string) *focused {
	b.t.Helper()
	b.do("press Tab", chromedp.KeyEvent(kb.Tab))
	f := jsValue[*focused](b, focusedJS)
	// The dashboard's own focus ring, not the browser's thin default
	// (outline-style auto, 1px).
	if f != nil && (!f.Visible || f.Style == "none" || f.Style == "auto" || f.Width < 2) {
		b.t.Errorf("%s: the focus does not show on %s (focus-visible %v, outline %s %vpx)", what, f.HTML, f.Visible, f.Style, f.Width)
	}
	return f
}

// outline lists what a screen reader's user would miss on the page: its
// one heading of the first level, its main landmark, a name for each
// table and image, no navigation landmark with nothing in it (the
// breadcrumb of a top page holds that page alone, as the current one).
const outline = `[
	...(document.querySelectorAll("h1").length === 1 ? [] : ["h1 × " + document.querySelectorAll("h1").length]),
	...(document.querySelectorAll("main").length === 1 ? [] : ["main × " + document.querySelectorAll("main").length]),
	...[...document.querySelectorAll("table")].filter(t => !(t.caption && t.caption.textContent.trim()) && !t.getAttribute("aria-label")).map(t => "a table without a caption: " + t.outerHTML.slice(0, 80)),
	...[...document.querySelectorAll("img, [role=img]")].filter(e => !(e.getAttribute("alt") || e.getAttribute("aria-label"))).map(e => "an image without a name: " + e.outerHTML.slice(0, 80)),
	...[...document.querySelectorAll("nav")].filter(n => !n.querySelector("a[href], [aria-current]")).map(n => "an empty navigation landmark: " + n.outerHTML),
]`

// keyboard checks that Tab reaches every control of the page, in its
// order, with the focus in sight on each; and the page's outline.
func (b *tab) keyboard(what string) {
	b.t.Helper()
	for _, o := range jsValue[[]string](b, outline) {
		b.t.Errorf("%s: %s", what, o)
	}
	if pos := jsValue[[]string](b, `[...document.querySelectorAll("[tabindex]")].filter(e => e.tabIndex > 0).map(e => e.outerHTML)`); len(pos) > 0 {
		b.t.Errorf("%s: a positive tabindex reorders the page: %q", what, pos)
	}
	want := jsValue[[]string](b, focusables+`.map(`+focusName+`)`)
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	// Round the page twice at most: the focus may start anywhere, and
	// leaves the page once between its last control and its first.
	for range 2*len(want) + 2 {
		if len(missing) == 0 {
			return
		}
		if f := b.tabFocus(what); f != nil {
			delete(missing, f.Name)
		}
	}
	for m := range missing {
		b.t.Errorf("%s: Tab never reaches %s", what, m)
	}
}

// tabTo presses Tab until the first element of sel has the focus.
func (b *tab) tabTo(sel string) {
	b.t.Helper()
	n := jsValue[int](b, focusables+`.length`)
	for range 2*n + 2 {
		if jsValue[bool](b, `document.activeElement === document.querySelector(`+js(sel)+`)`) {
			return
		}
		b.tabFocus("tab to " + sel)
	}
	b.t.Fatalf("Tab never reaches %s on %s", sel, b.path())
}

// press tabs to the first element of sel and presses key on it, which
// must lead to a new page.
func (b *tab) press(name, sel, key string) {
	b.t.Helper()
	b.tabTo(sel)
	b.load(name+" on "+sel, chromedp.KeyEvent(key))
}
