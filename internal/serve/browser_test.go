package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
)

// The browser test drives the dashboard in headless Chromium. It needs a
// Chromium binary: LEASEHOLD_CHROMIUM names one, else the usual Debian
// paths are tried. Without one the test skips, unless LEASEHOLD_TEST_BROWSER
// is 1 (as in CI), when it fails. LEASEHOLD_SCREENSHOTS, when it names a
// directory, receives the screenshots of the tabs that publish theirs:
// those of the demo scene, for the README (see browser_screens_test.go).
const (
	envChromium    = "LEASEHOLD_CHROMIUM"
	envBrowser     = "LEASEHOLD_TEST_BROWSER"
	envScreenshots = "LEASEHOLD_SCREENSHOTS"
)

// browserTimeout bounds everything one backend's browser does.
const browserTimeout = 60 * time.Second

// stepTimeout bounds each step: a navigation, a query, a screenshot.
const stepTimeout = 10 * time.Second

// liveTimeout bounds the wait for the queues page's live update, which
// polls every 3 seconds.
const liveTimeout = 10 * time.Second

// scriptQueue is a queue whose name is markup: every page must show it as
// text.
const scriptQueue = "<script>alert(1)</script>"

// chromium returns the Chromium binary, or skips (or, in CI, fails) the
// test when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"}
	if p := os.Getenv(envChromium); p != "" {
		candidates = []string{p}
	}
	for _, p := range candidates {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if os.Getenv(envBrowser) == "1" {
		t.Fatalf("%s=1 but no Chromium binary was found at %s (set %s to its path)", envBrowser, strings.Join(candidates, " or "), envChromium)
	}
	t.Skipf("no Chromium binary at %s; set %s, or %s=1 to make this a failure", strings.Join(candidates, " or "), envChromium, envBrowser)
	return ""
}

// seeded names the messages the test put in the store.
type seeded struct {
	completed, head, waiting1, waiting2 int64
	dead1, dead2                        int64
	json, binary                        int64
	jsonPayload                         []byte
	binaryPayload                       []byte
}

const ordersQueue = "orders"

// seed fills the store: the orders queue with messages in every state, a
// key with messages waiting behind a processing head, a JSON and a binary
// payload; and a queue named with markup, whose message and error are
// markup too.
func seed(t *testing.T, st store.Store) seeded {
	t.Helper()
	ctx := context.Background()
	var s seeded
	enqueue := func(msgs ...store.NewMessage) []int64 {
		t.Helper()
		out, err := st.Enqueue(ctx, msgs)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		ids := make([]int64, len(out))
		for i, e := range out {
			ids[i] = e.ID
		}
		return ids
	}
	claim := func(queue string, n int) []store.Delivery {
		t.Helper()
		ds, err := st.Claim(ctx, store.Claim{Queue: queue, WorkerID: "browser-test", Max: n, LeaseDuration: time.Hour})
		if err != nil || len(ds) != n {
			t.Fatalf("Claim %d of %s = %d, %v", n, queue, len(ds), err)
		}
		return ds
	}

	// A completed message.
	s.completed = enqueue(store.NewMessage{Queue: ordersQueue, Payload: []byte("shipped"), Kind: "ship"})[0]
	d := claim(ordersQueue, 1)
	if errs, err := st.Complete(ctx, []store.Completion{{Lease: d[0].Lease}}); err != nil || errs[0] != nil {
		t.Fatalf("Complete = %v, %v", errs, err)
	}

	// Two dead ones: deliveries used up, and a permanent error whose text
	// is markup.
	ids := enqueue(store.NewMessage{Queue: ordersQueue, Payload: []byte("charge card 1"), MaxDeliveries: 1, Kind: "charge"},
		store.NewMessage{Queue: ordersQueue, Payload: []byte("charge card 2"), MaxDeliveries: 1, Kind: "charge"})
	s.dead1, s.dead2 = ids[0], ids[1]
	for _, d := range claim(ordersQueue, 2) {
		f := store.Failure{Lease: d.Lease, Error: "card declined"}
		if d.MessageID == s.dead2 {
			f = store.Failure{Lease: d.Lease, Error: `<script>alert("error")</script>`, Permanent: true}
		}
		if dead, err := st.Fail(ctx, f); err != nil || !dead {
			t.Fatalf("Fail %d = %v, %v", d.MessageID, dead, err)
		}
	}

	// A key whose head is processing, with two messages waiting behind it.
	ids = enqueue(store.NewMessage{Queue: ordersQueue, Key: "customer-7", Payload: []byte("step 1")},
		store.NewMessage{Queue: ordersQueue, Key: "customer-7", Payload: []byte("step 2")},
		store.NewMessage{Queue: ordersQueue, Key: "customer-7", Payload: []byte("step 3")})
	s.head, s.waiting1, s.waiting2 = ids[0], ids[1], ids[2]
	if d := claim(ordersQueue, 1); d[0].MessageID != s.head {
		t.Fatalf("claimed %d, want the key's head %d", d[0].MessageID, s.head)
	}

	// Two pending ones: JSON (with attributes) and binary.
	s.jsonPayload = []byte(`{"order":42,"items":["book","pen"],"note":"<b>not bold</b>","total":{"amount":1999,"currency":"EUR"}}`)
	s.binaryPayload = []byte{0x00, 0x01, 0x02, 0xff, 0xfe, 0x7f, 'l', 'h', 0x00, 0x10, 0x80, 0x81, 0x1b, 0x00, 0x00, 0x42, 0x99, 0xaa}
	ids = enqueue(store.NewMessage{Queue: ordersQueue, Payload: s.jsonPayload, Kind: "order.placed", Attributes: []byte(`{"trace":"abc123"}`)},
		store.NewMessage{Queue: ordersQueue, Payload: s.binaryPayload, Kind: "blob"})
	s.json, s.binary = ids[0], ids[1]

	// The queue named with markup.
	enqueue(store.NewMessage{Queue: scriptQueue, Key: "<b>key</b>", Payload: []byte(`<img src=x onerror="alert(2)">`)})
	return s
}

// browserPassword is the dashboard's password in the browser test.
const browserPassword = "browser-test-dashboard-password"

// startServer runs a server of st on a loopback port, on the system clock,
// with a dashboard password, until the test ends, and returns its base
// URL.
func startServer(t *testing.T, st store.Store) string {
	t.Helper()
	srv, err := serve.New(serve.Config{Store: st, Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler),
		DashboardPassword: browserPassword})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + srv.Addr()
}

// problems collects what the page must never do: open a dialog, log an
// error, throw.
type problems struct {
	mu   sync.Mutex
	list []string
}

func (p *problems) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// take returns the problems so far and forgets them.
// expected drops the problems that hold text: what a step meant to
// happen, such as the browser's note of the status a page was meant to
// answer.
func (p *problems) expected(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = slices.DeleteFunc(p.list, func(s string) bool { return strings.Contains(s, text) })
}

func (p *problems) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.list
	p.list = nil
	return l
}

func remoteText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		switch {
		case a == nil:
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		default:
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}

// tab is a browser tab on the server.
type tab struct {
	t        *testing.T
	ctx      context.Context
	base     string
	shots    string
	problems *problems

	http         *http.Client
	linksChecked map[string]bool

	// publish copies the tab's screenshots to LEASEHOLD_SCREENSHOTS.
	publish bool
}

// newTab starts Chromium for the test, bounded by browserTimeout, and
// watches its page for dialogs, console errors and exceptions.
func newTab(t *testing.T, exe, base string) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	tctx, tcancel := context.WithTimeout(context.Background(), browserTimeout)
	actx, acancel := chromedp.NewExecAllocator(tctx, opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		acancel()
		tcancel()
	})
	b := &tab{t: t, ctx: ctx, base: base, shots: t.TempDir(), problems: &problems{},
		http: &http.Client{Timeout: 10 * time.Second}, linksChecked: map[string]bool{}}
	// Listen starts the browser and opens the tab; it sees every event of
	// the pages loaded after it.
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			b.problems.add("a %s dialog opened on %s: %q", ev.Type, ev.URL, ev.Message)
			// The dialog blocks the page: dismiss it, from outside the
			// event loop.
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				b.problems.add("console.%s: %s", ev.Type, remoteText(ev.Args))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			text := d.Text
			if d.Exception != nil {
				text += " " + d.Exception.Description
			}
			b.problems.add("exception at %s:%d: %s", d.URL, d.LineNumber+1, text)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				b.problems.add("log error (%s) %s: %s", ev.Entry.Source, ev.Entry.URL, ev.Entry.Text)
			}
		}
	})
	if err != nil {
		t.Fatalf("start Chromium (%s): %v", exe, err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("viewport: %v", err)
	}
	return b
}

// noProblems fails the test with whatever the page did wrong so far.
func (b *tab) noProblems(when string) {
	b.t.Helper()
	for _, p := range b.problems.take() {
		b.t.Errorf("%s: %s", when, p)
	}
}

// step bounds one step of the test, so that a missing element fails it
// at once rather than at the end of browserTimeout.
func (b *tab) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, stepTimeout)
}

// do runs actions that stay on the page.
func (b *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// load runs actions that lead to a new page (a navigation, a link, a
// form), waits for that page to load and checks it answered 200.
func (b *tab) load(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.loadStatus(what, http.StatusOK, actions...)
}

// loadStatus is load of a page that answers status.
func (b *tab) loadStatus(what string, status int64, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, actions...)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	if resp == nil {
		b.t.Fatalf("%s: no response", what)
	}
	if status != http.StatusOK {
		b.problems.expected(fmt.Sprintf("the server responded with a status of %d", status))
	}
	if resp.Status != status {
		body := jsValue[string](b, `document.body ? document.body.innerText : ""`)
		b.t.Fatalf("%s: %s answered %d %s, want %d: %s", what, resp.URL, resp.Status, resp.StatusText, status, body)
	}
	b.noProblems(what)
	b.checkPage(what)
}

// checkPage checks what every page owes: each of its links answers 200,
// every control has an accessible name, and no id is used twice.
func (b *tab) checkPage(what string) {
	b.t.Helper()
	links := jsValue[[]string](b, `[...new Set([...document.links].map(a => a.href))]`)
	for _, l := range links {
		if !strings.HasPrefix(l, b.base+"/") {
			b.t.Errorf("%s: the link %s leaves the dashboard", what, l)
			continue
		}
		if b.linksChecked[l] {
			continue
		}
		b.linksChecked[l] = true
		resp, err := b.http.Get(l)
		if err != nil {
			b.t.Fatalf("%s: the link %s: %v", what, l, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.t.Errorf("%s: the link %s answers %s", what, l, resp.Status)
		}
	}
	unnamed := jsValue[[]string](b, `[...document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea")]
		.filter(e => e.matches("a, button")
			? !(e.textContent.trim() || e.getAttribute("aria-label") || e.getAttribute("aria-labelledby"))
			: !((e.labels && e.labels.length) || e.getAttribute("aria-label") || e.getAttribute("aria-labelledby")))
		.map(e => e.outerHTML)`)
	for _, u := range unnamed {
		b.t.Errorf("%s: a control has no accessible name: %s", what, u)
	}
	dups := jsValue[[]string](b, `(ids => ids.filter((id, i) => ids.indexOf(id) !== i))([...document.querySelectorAll("[id]")].map(e => e.id))`)
	if len(dups) > 0 {
		b.t.Errorf("%s: ids used more than once: %q", what, dups)
	}
	if lang := jsValue[string](b, `document.documentElement.lang`); lang == "" {
		b.t.Errorf("%s: the page has no lang", what)
	}
	if title := jsValue[string](b, `document.title`); title == "" {
		b.t.Errorf("%s: the page has no title", what)
	}
}

func (b *tab) open(path string) {
	b.t.Helper()
	b.load("open "+path, chromedp.Navigate(b.base+path))
}

// click clicks the first element of a CSS selector, which must lead to a
// new page.
func (b *tab) click(sel string) {
	b.t.Helper()
	b.load("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// jsValue evaluates a JavaScript expression in the page.
func jsValue[T any](b *tab, expr string) T {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// js quotes a Go string as a JavaScript string literal.
func js(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// textOf is the text (textContent) of the first element of a CSS
// selector; it fails the test when there is none.
func (b *tab) textOf(sel string) string {
	b.t.Helper()
	v := jsValue[*string](b, `(e => e ? e.textContent : null)(document.querySelector(`+js(sel)+`))`)
	if v == nil {
		b.t.Fatalf("the page %s has no %s", jsValue[string](b, "location.href"), sel)
	}
	return *v
}

// path is the page's path and query.
func (b *tab) path() string {
	b.t.Helper()
	return jsValue[string](b, "location.pathname + location.search")
}

// waitFor waits until a JavaScript expression is true in the page, at
// most timeout.
func (b *tab) waitFor(what, expr string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+stepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(timeout))); err != nil {
		b.t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// shot saves a screenshot of the viewport as name.png, and copies it to
// LEASEHOLD_SCREENSHOTS when that is set and the tab publishes.
func (b *tab) shot(name string) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(buf))
	if err != nil || cfg.Width != 1280 || cfg.Height != 800 {
		b.t.Fatalf("screenshot %s: %dx%d, %v; want a 1280x800 PNG", name, cfg.Width, cfg.Height, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	dir := os.Getenv(envScreenshots)
	if dir == "" || !b.publish {
		return
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		b.t.Fatalf("%s=%s does not name a directory", envScreenshots, dir)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// cssString quotes s as a CSS string.
func cssString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\a `).Replace(s) + `"`
}

// row is the CSS selector of a queue's row on the queues page.
func row(queue string) string { return `#queues tr[data-queue=` + cssString(queue) + `]` }

// counts reads a queue page's counts by state.
func (b *tab) counts() map[string]int64 {
	b.t.Helper()
	return jsValue[map[string]int64](b, `Object.fromEntries([...document.querySelectorAll("ul.counts li")]
		.filter(li => li.querySelector("strong"))
		.map(li => [li.firstChild.textContent.trim(), Number(li.querySelector("strong").textContent)]))`)
}

func wantCounts(t *testing.T, where string, got map[string]int64, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s count %d, want %d (all: %v)", where, k, got[k], v, got)
		}
	}
}

func TestDashboardInBrowser(t *testing.T) {
	testproc.SkipShort(t, "drives headless Chromium")
	exe := chromium(t)
	for _, bk := range backends() {
		t.Run(bk.name, func(t *testing.T) {
			st := bk.open(t, nil) // the system clock: the page polls in real time
			s := seed(t, st)
			base := startServer(t, st)
			b := newTab(t, exe, base)
			ctx := context.Background()
			orders := "/queues/" + ordersQueue

			// Signed out, the dashboard sends the browser to its login
			// page, whose form is labelled and focused; a wrong password
			// is named there, the right one leads back.
			b.open("/")
			if got := b.path(); got != "/login?next=%2F" {
				t.Fatalf("a signed-out browser was sent to %s, want the login page", got)
			}
			if got := jsValue[string](b, `document.activeElement.id`); got != "password" {
				t.Errorf("the login page's focus is on %q, want the password", got)
			}
			if got := b.textOf(`label[for="password"]`); got != "Dashboard password" {
				t.Errorf("the password's label reads %q", got)
			}
			b.shot("login")
			const signIn = `form[action="/login"] button[type="submit"]`
			b.loadStatus("sign in with a wrong password", http.StatusUnauthorized,
				chromedp.SendKeys(chromedp.CSS("#password"), "a wrong password, long enough"), chromedp.Click(chromedp.CSS(signIn)))
			if got := b.textOf(`[role="alert"]`); got != "wrong password" {
				t.Errorf("a wrong password says %q", got)
			}
			if !jsValue[bool](b, `document.querySelector("#password").getAttribute("aria-invalid") === "true" &&
				document.querySelector("#password").getAttribute("aria-describedby") === "login-error"`) {
				t.Errorf("the password field does not point at its error")
			}
			b.load("sign in", chromedp.SendKeys(chromedp.CSS("#password"), browserPassword), chromedp.Click(chromedp.CSS(signIn)))
			if got := b.path(); got != "/" {
				t.Fatalf("the sign-in led to %s, want /", got)
			}
			// The link checker signs in through the same form.
			c, code := login(t, base, browserPassword)
			if code != http.StatusSeeOther {
				t.Fatalf("the link checker's sign-in = %d", code)
			}
			c.Timeout = 10 * time.Second
			b.http = c

			// The queues page shows the markup-named queue as text, and runs
			// no script but its own.
			b.open("/")
			b.waitFor("app.js", `document.readyState === "complete"`, 5*time.Second)
			if got := b.textOf("h1"); got != "Queues" {
				t.Errorf("queues page h1 %q", got)
			}
			rowText := jsValue[string](b, `document.querySelector(`+js(row(scriptQueue))+`).innerText`)
			if !strings.Contains(rowText, scriptQueue) {
				t.Errorf("the row of %s shows %q, not the name as text", scriptQueue, rowText)
			}
			if got := b.textOf(row(scriptQueue) + " th a"); got != scriptQueue {
				t.Errorf("the link of %s reads %q", scriptQueue, got)
			}
			scripts := jsValue[[]string](b, `[...document.scripts].map(s => s.getAttribute("src"))`)
			if len(scripts) != 1 || scripts[0] != "/static/app.js" {
				t.Errorf("the queues page has scripts %q, want only /static/app.js", scripts)
			}
			if got := b.textOf(row(ordersQueue) + ` [data-field="pending"]`); got != "2" {
				t.Errorf("orders pending on the queues page: %q, want 2", got)
			}
			b.shot("queues")

			// The markup-named queue's link leads to its page, which names it
			// as text too.
			b.click(row(scriptQueue) + " th a")
			if got := b.textOf("h1 .name"); got != scriptQueue {
				t.Errorf("the page of %s is named %q", scriptQueue, got)
			}
			if got := b.textOf("table tbody td"); got != "<b>key</b>" {
				t.Errorf("the message key of %s reads %q", scriptQueue, got)
			}

			// Back to the queues page by the breadcrumb, then the orders queue.
			b.click(`header nav a[href="/"]`)
			b.click(row(ordersQueue) + " th a")
			if got := b.path(); got != orders {
				t.Fatalf("the orders link led to %s", got)
			}
			wantCounts(t, "queue page", b.counts(), map[string]int64{"pending": 2, "waiting": 2, "processing": 1,
				"completed": 1, "dead": 2, "cancelled": 0, "blocked keys": 1})
			listed := jsValue[[]string](b, `[...document.querySelectorAll("table tbody th a")].map(a => a.textContent)`)
			if want := []string{strconv.FormatInt(s.json, 10), strconv.FormatInt(s.binary, 10)}; strings.Join(listed, ",") != strings.Join(want, ",") {
				t.Errorf("pending messages listed: %v, want %v", listed, want)
			}
			b.shot("queue")

			// A message, by its id link: the JSON payload pretty-printed.
			b.click(fmt.Sprintf(`table tbody th a[href=%s]`, cssString(fmt.Sprintf("%s/messages/%d", orders, s.json))))
			if got, want := b.textOf("h1"), fmt.Sprintf("Message %d", s.json); got != want {
				t.Errorf("message page h1 %q, want %q", got, want)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, s.jsonPayload, "", "  "); err != nil {
				t.Fatal(err)
			}
			if got := b.textOf("pre.payload"); got != pretty.String() {
				t.Errorf("the JSON payload reads\n%s\nwant\n%s", got, pretty.String())
			}
			if got := b.textOf("h2 .hint"); !strings.Contains(got, "JSON") || !strings.Contains(got, fmt.Sprintf("%d bytes", len(s.jsonPayload))) {
				t.Errorf("the payload's heading says %q", got)
			}
			attrs := jsValue[[]string](b, `[...document.querySelectorAll("pre.payload")].map(p => p.textContent)`)
			if len(attrs) != 2 || !strings.Contains(attrs[1], `"trace": "abc123"`) {
				t.Errorf("the attributes read %q", attrs)
			}
			b.shot("message")

			// The binary one, through the queue page's "Message id" form:
			// shown in hex.
			b.click(`header nav a[href="` + orders + `"]`)
			b.do("type the binary message's id", chromedp.SendKeys(chromedp.CSS("#id"), strconv.FormatInt(s.binary, 10)))
			b.click(`form:has(#id) button[type="submit"]`)
			if got, want := b.path(), fmt.Sprintf("%s/messages/%d", orders, s.binary); got != want {
				t.Errorf("the Message id form led to %s, want %s", got, want)
			}
			if got := b.textOf("pre.payload"); !strings.HasPrefix(got, "00000000  00 01 02 ff fe 7f 6c 68 00 10 80 81 1b 00 00 42\n00000010  99 aa") {
				t.Errorf("the binary payload reads %q", got)
			}

			// The keys page: customer-7 waits behind its processing head.
			b.click(`header nav a[href="` + orders + `"]`)
			b.click(`a[href="` + orders + `/keys"]`)
			keyRows := jsValue[[][]string](b, `[...document.querySelectorAll("table tbody tr")].map(r => [...r.cells].map(c => c.textContent.trim()))`)
			if len(keyRows) != 1 || len(keyRows[0]) < 5 || keyRows[0][0] != "customer-7" || keyRows[0][1] != "2" ||
				keyRows[0][2] != strconv.FormatInt(s.head, 10) || keyRows[0][3] != "processing" {
				t.Errorf("the keys page lists %q, want customer-7 with 2 waiting behind %d, processing", keyRows, s.head)
			}
			b.shot("keys")
			b.click(`table tbody th a`)
			waiting := jsValue[[]string](b, `[...document.querySelectorAll("table tbody th a")].map(a => a.textContent)`)
			if want := []string{strconv.FormatInt(s.waiting1, 10), strconv.FormatInt(s.waiting2, 10)}; strings.Join(waiting, ",") != strings.Join(want, ",") {
				t.Errorf("the key's link lists %v, want the waiting %v", waiting, want)
			}

			// Dead letters: select one, redrive it through the confirmation
			// page.
			b.open(orders)
			before := b.counts()
			b.click(`a[href="` + orders + `/dead"]`)
			deadIDs := jsValue[[]string](b, `[...document.querySelectorAll('input[type="checkbox"][name="id"]')].map(c => c.value)`)
			if want := []string{strconv.FormatInt(s.dead1, 10), strconv.FormatInt(s.dead2, 10)}; strings.Join(deadIDs, ",") != strings.Join(want, ",") {
				t.Fatalf("dead letters listed: %v, want %v", deadIDs, want)
			}
			if got := b.textOf(fmt.Sprintf(`tr:has(#pick-%d) td.error`, s.dead2)); got != `<script>alert("error")</script>` {
				t.Errorf("the markup error reads %q", got)
			}
			pick := fmt.Sprintf("#pick-%d", s.dead1)
			b.do("tick "+pick, chromedp.Click(chromedp.CSS(pick)))
			if !jsValue[bool](b, `document.querySelector(`+js(pick)+`).checked`) {
				t.Fatalf("clicking %s did not tick it", pick)
			}
			b.shot("dead")
			b.click(`button[name="action"][value="redrive"]`)
			if got := b.path(); got != orders+"/confirm" {
				t.Errorf("Redrive selected… led to %s", got)
			}
			if got := jsValue[[]string](b, `[...document.querySelectorAll("ul.ids li")].map(li => li.textContent)`); len(got) != 1 || got[0] != strconv.FormatInt(s.dead1, 10) {
				t.Errorf("the confirmation lists %q, want [%d]", got, s.dead1)
			}
			b.shot("confirm")
			const yes = `form[action$="/apply"] button[type="submit"]`
			if got := b.textOf(yes); got != "Yes, redrive them" {
				t.Errorf("the confirmation's button reads %q", got)
			}
			b.click(yes)
			if got := b.path(); !strings.HasPrefix(got, orders+"/dead") {
				t.Errorf("the redrive led to %s, want back to the dead letters", got)
			}
			if got := b.textOf(".flash"); got != "redrove 1 of 1 message(s) in orders" {
				t.Errorf("the redrive says %q", got)
			}
			deadIDs = jsValue[[]string](b, `[...document.querySelectorAll('input[type="checkbox"][name="id"]')].map(c => c.value)`)
			if len(deadIDs) != 1 || deadIDs[0] != strconv.FormatInt(s.dead2, 10) {
				t.Errorf("dead letters after the redrive: %v, want [%d]", deadIDs, s.dead2)
			}
			b.click(`header nav a[href="` + orders + `"]`)
			wantCounts(t, "queue page after the redrive", b.counts(), map[string]int64{"dead": before["dead"] - 1, "pending": before["pending"] + 1})
			if stats, err := st.Stats(ctx, ordersQueue); err != nil || stats.Dead != 1 || stats.Pending != 3 {
				t.Errorf("the store after the redrive: %+v, %v", stats, err)
			}

			// Pause the markup-named queue from the queues page, then resume it.
			b.click(`header nav a[href="/"]`)
			pauseButton := row(scriptQueue) + ` form button[type="submit"]`
			if got := b.textOf(pauseButton); got != "Pause "+scriptQueue {
				t.Errorf("the pause button's text is %q", got)
			}
			b.click(pauseButton)
			if got := b.textOf(".flash"); got != "paused "+scriptQueue {
				t.Errorf("the pause says %q", got)
			}
			if got := b.textOf(row(scriptQueue) + ` [data-field="status"]`); got != "paused" {
				t.Errorf("the status of %s after Pause: %q", scriptQueue, got)
			}
			if stats, err := st.Stats(ctx, scriptQueue); err != nil || !stats.Paused {
				t.Errorf("the store after Pause: %+v, %v", stats, err)
			}
			if got := b.textOf(pauseButton); got != "Resume "+scriptQueue {
				t.Errorf("the button after Pause reads %q", got)
			}
			b.click(pauseButton)
			if got := b.textOf(row(scriptQueue) + ` [data-field="status"]`); got != "running" {
				t.Errorf("the status of %s after Resume: %q", scriptQueue, got)
			}
			if stats, err := st.Stats(ctx, scriptQueue); err != nil || stats.Paused {
				t.Errorf("the store after Resume: %+v, %v", stats, err)
			}

			// The live update: counts changed in the store reach the table
			// without a reload.
			b.open("/")
			jsValue[chromedp.Void](b, `window.leaseholdNotReloaded = true`)
			pending := row(ordersQueue) + ` [data-field="pending"]`
			if got := b.textOf(pending); got != "3" {
				t.Fatalf("orders pending before the live update: %q, want 3", got)
			}
			if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: ordersQueue, Payload: []byte("live")}}); err != nil {
				t.Fatal(err)
			}
			if err := st.Pause(ctx, ordersQueue); err != nil {
				t.Fatal(err)
			}
			b.waitFor("the live pending count and status", `document.querySelector(`+js(pending)+`).textContent === "4" &&
				document.querySelector(`+js(row(ordersQueue)+` [data-field="status"]`)+`).textContent === "paused"`, liveTimeout)
			if !jsValue[bool](b, `window.leaseholdNotReloaded === true`) {
				t.Errorf("the queues page reloaded instead of updating in place")
			}
			if got := b.textOf(row(ordersQueue) + ` form button[type="submit"]`); got != "Resume "+ordersQueue {
				t.Errorf("the live update left the button reading %q", got)
			}
			b.noProblems("the live update")

			// Signing out ends the session: the dashboard is behind its
			// login page again.
			b.click(`form.logout button[type="submit"]`)
			if got := b.path(); got != "/login" {
				t.Errorf("signing out led to %s, want /login", got)
			}
			b.open(orders)
			if got := b.path(); !strings.HasPrefix(got, "/login?next=") {
				t.Errorf("after signing out, %s showed %s, want the login page", orders, got)
			}
		})
	}
}
