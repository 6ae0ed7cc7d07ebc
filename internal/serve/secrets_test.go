package serve_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/authlimit"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/store"
)

const (
	testPassword = "dashboard-password-for-tests"
	testToken    = "metrics-token-for-tests-0123"
)

// do sends a request with its headers set by hdr and returns its status
// and body.
func do(t *testing.T, method, url string, hdr func(*http.Request)) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if hdr != nil {
		hdr(req)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// The SigV4 secret opens nothing but the SQS API: on a server with
// credentials and no other secrets, the dashboard and /metrics are
// closed with a 403 that names the variable that opens each, whatever
// the request sends; health checks stay open for load balancers.
func TestCredentialsNeverOpenDashboardOrMetrics(t *testing.T) {
	f := setup(t, backends()[0], options{signed: true})
	basic := func(r *http.Request) { r.SetBasicAuth(testKey, testSecret) }
	for path, want := range map[string]string{"/": "LEASEHOLD_DASHBOARD_PASSWORD", "/queues/x": "LEASEHOLD_DASHBOARD_PASSWORD",
		"/login": "LEASEHOLD_DASHBOARD_PASSWORD", "/metrics": "LEASEHOLD_METRICS_TOKEN"} {
		for _, hdr := range []func(*http.Request){nil, basic} {
			code, body, _ := do(t, http.MethodGet, f.url+path, hdr)
			if code != http.StatusForbidden || !strings.Contains(body, want) {
				t.Errorf("GET %s = %d %q, want 403 naming %s", path, code, body, want)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body, _ := do(t, http.MethodGet, f.url+path, nil); code != 200 {
			t.Errorf("GET %s = %d %s, want 200", path, code, body)
		}
	}
}

// /metrics takes its token as Prometheus sends it, and nothing else.
func TestMetricsTakeABearerToken(t *testing.T) {
	f := setup(t, backends()[0], options{signed: true, adjust: func(c *serve.Config) { c.MetricsToken = testToken }})
	for name, tc := range map[string]struct {
		hdr  func(*http.Request)
		want int
	}{
		"nothing":            {nil, 401},
		"the SigV4 secret":   {func(r *http.Request) { r.SetBasicAuth(testKey, testSecret) }, 401},
		"the token by basic": {func(r *http.Request) { r.SetBasicAuth("prometheus", testToken) }, 401},
		"a wrong token":      {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken+"x") }, 401},
		"the token":          {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken) }, 200},
	} {
		code, body, h := do(t, http.MethodGet, f.url+"/metrics", tc.hdr)
		if code != tc.want {
			t.Errorf("GET /metrics with %s = %d, want %d", name, code, tc.want)
		}
		if code == 401 && h.Get("WWW-Authenticate") != `Bearer realm="leasehold"` {
			t.Errorf("GET /metrics with %s: WWW-Authenticate %q", name, h.Get("WWW-Authenticate"))
		}
		if code == 200 && !strings.Contains(body, "go_goroutines") {
			t.Errorf("GET /metrics with the token: no metrics in %q", body[:min(len(body), 200)])
		}
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login signs a browser (a client with a cookie jar) in through the
// login page and returns it.
func login(t *testing.T, base, password string) (*http.Client, int) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(page))
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("GET /login = %d without a CSRF token:\n%s", resp.StatusCode, page)
	}
	resp, err = c.PostForm(base+"/login", url.Values{"csrf": {m[1]}, "password": {password}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c, resp.StatusCode
}

// The dashboard password opens the dashboard through its login page; the
// SigV4 secret does not sign in. Every server of a database takes a
// session that one of them started.
func TestDashboardPasswordSignsIn(t *testing.T) {
	withPassword := func(c *serve.Config) { c.DashboardPassword = testPassword }
	f := setup(t, backends()[0], options{signed: true, adjust: withPassword})
	if code, _, h := do(t, http.MethodGet, f.url+"/", nil); code != 303 || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Fatalf("GET / without a session = %d to %q, want 303 to /login", code, h.Get("Location"))
	}
	if _, code := login(t, f.url, testSecret); code != 401 {
		t.Fatalf("sign-in with the SigV4 secret = %d, want 401", code)
	}
	c, code := login(t, f.url, testPassword)
	if code != 303 {
		t.Fatalf("sign-in with the password = %d, want 303", code)
	}
	resp, err := c.Get(f.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET / signed in = %d", resp.StatusCode)
	}

	// A second server of the same database: the browser's session is
	// good there too.
	srv2, err := serve.New(serve.Config{Store: f.st, Addr: "127.0.0.1:0", Clock: f.clk, Logger: slog.New(slog.DiscardHandler),
		DashboardPassword: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(f.url)
	req := localRequest("/")
	for _, ck := range c.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	w := httptest.NewRecorder()
	srv2.Handler().ServeHTTP(w, req)
	if w.Code != 200 {
		t.Fatalf("another server of the database refused the session: %d", w.Code)
	}
}

// Over TLS, or behind a proxy that ends it, cookies are Secure and every
// response asks the browser to keep to HTTPS.
func TestBehindTLSProxySecuresCookies(t *testing.T) {
	f := setup(t, backends()[0], options{adjust: func(c *serve.Config) {
		c.DashboardPassword, c.BehindTLSProxy = testPassword, true
	}})
	for _, path := range []string{"/login", "/healthz"} {
		code, _, h := do(t, http.MethodGet, f.url+path, nil)
		if code != 200 || h.Get("Strict-Transport-Security") != "max-age=31536000" {
			t.Errorf("GET %s = %d, Strict-Transport-Security %q", path, code, h.Get("Strict-Transport-Security"))
		}
		if path == "/login" && (len(h.Values("Set-Cookie")) == 0 || !strings.Contains(h.Get("Set-Cookie"), "; Secure")) {
			t.Errorf("GET /login sets cookies %q, want Secure", h.Values("Set-Cookie"))
		}
	}
	plain := setup(t, backends()[0], options{})
	if _, _, h := do(t, http.MethodGet, plain.url+"/healthz", nil); h.Get("Strict-Transport-Security") != "" {
		t.Fatal("a plain HTTP server on loopback sends Strict-Transport-Security")
	}
	// Clients reach it over HTTPS, so the queue URLs it hands out are
	// https ones.
	if u := f.createQueue("behind-proxy", nil); !strings.HasPrefix(u, "https://") {
		t.Errorf("CreateQueue behind a TLS proxy gives the URL %s, want an https one", u)
	}
}

// A setting that would expose a secret or accept a guessable one is
// refused before anything listens, with one line that names the fix.
func TestConfigRefusesWeakSetups(t *testing.T) {
	ok := serve.Config{Addr: "0.0.0.0:9324", AccessKeyID: testKey, SecretAccessKey: testSecret, TLSCertFile: "c.pem", TLSKeyFile: "k.pem"}
	if err := ok.Check(); err != nil {
		t.Fatalf("a sound config: %v", err)
	}
	for name, tc := range map[string]struct {
		adjust func(*serve.Config)
		want   string
	}{
		"plain HTTP on an open address": {func(c *serve.Config) { c.TLSCertFile, c.TLSKeyFile = "", "" }, "--behind-tls-proxy"},
		"a certificate without its key": {func(c *serve.Config) { c.TLSKeyFile = "" }, "TLS key"},
		"a short secret access key":     {func(c *serve.Config) { c.SecretAccessKey = "fifteen chars.." }, "the secret access key has 15 characters, needs at least 16"},
		"a short dashboard password":    {func(c *serve.Config) { c.DashboardPassword = "short" }, "the dashboard password has 5 characters"},
		"a short metrics token":         {func(c *serve.Config) { c.MetricsToken = "short" }, "the metrics token has 5 characters"},
	} {
		c := ok
		tc.adjust(&c)
		err := c.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %q", name, err, tc.want)
		}
	}
	behind := ok
	behind.TLSCertFile, behind.TLSKeyFile, behind.BehindTLSProxy = "", "", true
	if err := behind.Check(); err != nil {
		t.Fatalf("plain HTTP behind a TLS proxy: %v", err)
	}
	if err := (serve.Config{Addr: "127.0.0.1:0"}).Check(); err != nil {
		t.Fatalf("plain HTTP on loopback without credentials: %v", err)
	}
}

// writeRefused is a store whose database answers but takes no writes.
type writeRefused struct{ store.Store }

func (writeRefused) CheckWrite(context.Context) error {
	return errors.New("attempt to write a readonly database")
}

// hung is a store whose database never answers a write.
type hung struct{ store.Store }

func (hung) CheckWrite(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// /readyz answers 503 within a second when the database hangs: it does
// not wait for it.
func TestReadyHasADeadline(t *testing.T) {
	b := backends()[0]
	f := setup(t, b, options{})
	srv, err := serve.New(serve.Config{Store: hung{f.st}, Addr: "127.0.0.1:0", Clock: f.clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, localRequest("/readyz"))
		done <- w
	}()
	if err := f.clk.BlockUntil(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-done:
		t.Fatalf("/readyz answered %d before its deadline", w.Code)
	default:
	}
	f.clk.Advance(time.Second)
	w := <-done
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "did not commit a write within 1s") {
		t.Fatalf("/readyz of a hung database = %d %q", w.Code, w.Body.String())
	}
}

// localRequest is a GET of path for a server's handler, addressed to
// loopback as a server without credentials requires.
func localRequest(path string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = "127.0.0.1"
	return req
}

// readOnly opens the database of a backend twice: writable, then
// refusing writes as a read-only file or a read-only session does.
type readOnly struct {
	name string
	open func(t *testing.T) (rw, ro store.Store)
}

// /readyz is 503 when the database answers but takes no writes, as every
// send and delete would fail, and names why; /healthz stays 200.
func TestReadyNeedsWrites(t *testing.T) {
	for _, b := range readOnlyBackends() {
		t.Run(b.name, func(t *testing.T) {
			rw, ro := b.open(t)
			for _, tc := range []struct {
				st   store.Store
				want int
			}{{rw, 200}, {ro, 503}, {writeRefused{rw}, 503}} {
				srv, err := serve.New(serve.Config{Store: tc.st, Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				if err := tc.st.Ping(context.Background()); err != nil {
					t.Fatalf("Ping: %v", err)
				}
				w := httptest.NewRecorder()
				srv.Handler().ServeHTTP(w, localRequest("/readyz"))
				if w.Code != tc.want || (tc.want == 503 && !strings.Contains(w.Body.String(), "does not take writes")) {
					t.Errorf("/readyz of %T = %d %q, want %d", tc.st, w.Code, w.Body.String(), tc.want)
				}
				w = httptest.NewRecorder()
				srv.Handler().ServeHTTP(w, localRequest("/healthz"))
				if w.Code != 200 {
					t.Errorf("/healthz of %T = %d", tc.st, w.Code)
				}
			}
		})
	}
}

// A TLS pair that does not load stops New with an error naming the files;
// a server without TLS has no pair to reload.
func TestTLSPairMustLoad(t *testing.T) {
	f := setup(t, backends()[0], options{})
	dir := t.TempDir()
	cfg := serve.Config{Store: f.st, Addr: "127.0.0.1:0", Clock: f.clk, Logger: slog.New(slog.DiscardHandler),
		TLSCertFile: dir + "/missing-cert.pem", TLSKeyFile: dir + "/missing-key.pem"}
	if _, err := serve.New(cfg); err == nil || !strings.Contains(err.Error(), "missing-cert.pem") {
		t.Fatalf("New with missing TLS files: %v", err)
	}
	if err := f.srv.ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS on a plain HTTP server: no error")
	}
}

// Failures on any face spend one budget of the client's address: a
// guesser of the metrics token is refused by the SQS API and the sign-in
// page too, before its secret is looked at, until the budget refills.
func TestFailedAuthenticationSharesOneBudget(t *testing.T) {
	f := setup(t, backends()[0], options{signed: true, adjust: func(c *serve.Config) {
		c.MetricsToken, c.DashboardPassword = testToken, testPassword
	}})
	token := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	for i := range authlimit.Burst {
		if code, _, _ := do(t, http.MethodGet, f.url+"/metrics", token("a-wrong-guess-of-the-token")); code != 401 {
			t.Fatalf("wrong token %d = %d, want 401", i, code)
		}
	}
	if code, _, h := do(t, http.MethodGet, f.url+"/metrics", token(testToken)); code != 429 || h.Get("Retry-After") == "" {
		t.Fatalf("the right token past the budget = %d, Retry-After %q; want 429 with Retry-After", code, h.Get("Retry-After"))
	}
	if _, err := f.c.ListQueues(f.ctx, &sqs.ListQueuesInput{}); err == nil || !strings.Contains(err.Error(), "RequestThrottled") {
		t.Fatalf("a signed SQS request past the budget: %v, want RequestThrottled", err)
	}
	if _, code := login(t, f.url, testPassword); code != 429 {
		t.Fatalf("the right password past the budget = %d, want 429", code)
	}
	f.clk.Advance(authlimit.Refill)
	if code, _, _ := do(t, http.MethodGet, f.url+"/metrics", token(testToken)); code != 200 {
		t.Fatalf("the right token once the budget refilled by one = %d, want 200", code)
	}
}

// Behind a TLS proxy every request comes from the proxy's address: the
// budget spent is that of the client the proxy names in
// X-Forwarded-For, so one stranger's failures lock out no one else.
func TestBehindProxyBudgetsAreThoseOfClients(t *testing.T) {
	f := setup(t, backends()[0], options{signed: true, adjust: func(c *serve.Config) {
		c.MetricsToken, c.BehindTLSProxy = testToken, true
	}})
	from := func(client, tok string) func(*http.Request) {
		return func(r *http.Request) {
			r.Header.Set("X-Forwarded-For", client)
			r.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	for range authlimit.Burst + 1 {
		do(t, http.MethodGet, f.url+"/metrics", from("203.0.113.7", "a-wrong-guess-of-the-token"))
	}
	if code, _, _ := do(t, http.MethodGet, f.url+"/metrics", from("203.0.113.7", testToken)); code != 429 {
		t.Fatalf("the guesser with the right token = %d, want 429", code)
	}
	if code, _, _ := do(t, http.MethodGet, f.url+"/metrics", from("198.51.100.1", testToken)); code != 200 {
		t.Fatalf("another client through the same proxy = %d, want 200", code)
	}
}

// counted counts its store's write checks.
type counted struct {
	store.Store
	checks atomic.Int64
}

func (c *counted) CheckWrite(ctx context.Context) error {
	c.checks.Add(1)
	return c.Store.CheckWrite(ctx)
}

// However often /readyz is asked, the database commits one write check
// a second: callers within it share the last answer.
func TestReadyChecksOnceASecond(t *testing.T) {
	f := setup(t, backends()[0], options{})
	st := &counted{Store: f.st}
	srv, err := serve.New(serve.Config{Store: st, Addr: "127.0.0.1:0", Clock: f.clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ask := func() {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				w := httptest.NewRecorder()
				srv.Handler().ServeHTTP(w, localRequest("/readyz"))
				if w.Code != http.StatusOK {
					t.Errorf("/readyz = %d %q", w.Code, w.Body.String())
				}
			})
		}
		wg.Wait()
	}
	ask()
	ask()
	if n := st.checks.Load(); n != 1 {
		t.Fatalf("100 calls within a second made %d write checks, want 1", n)
	}
	f.clk.Advance(time.Second)
	ask()
	if n := st.checks.Load(); n != 2 {
		t.Fatalf("after a second: %d write checks in all, want 2", n)
	}
}

// shortSecret hands out a server secret that someone wrote by hand.
type shortSecret struct{ store.Store }

func (shortSecret) ServerSecret(context.Context, string) ([]byte, error) { return []byte("short"), nil }

// A server secret too short to key handles and sessions with stops the
// server at start, naming it.
func TestShortServerSecretIsRefused(t *testing.T) {
	f := setup(t, backends()[0], options{})
	_, err := serve.New(serve.Config{Store: shortSecret{f.st}, Addr: "127.0.0.1:0", Clock: f.clk, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "has 5 bytes") {
		t.Fatalf("New with a 5-byte server secret: %v", err)
	}
}
