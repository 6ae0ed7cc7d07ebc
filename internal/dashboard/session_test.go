package dashboard_test

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/dashboard"
	"github.com/leasehold/leasehold/store"
)

const password = "correct horse battery staple"

func withPassword(c *dashboard.Config) { c.Password = password }

// cookie is the fixture's browser's cookie of that name, or nil.
func (f *fixture) cookie(name string) *http.Cookie {
	u, _ := url.Parse(f.url)
	for _, c := range f.c.Jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// signIn signs the fixture's browser in through the login page and
// returns the session cookie as the server set it.
func (f *fixture) signIn(next string) (string, *http.Cookie) {
	f.t.Helper()
	_, page := f.get("/login")
	resp, err := f.c.PostForm(f.url+"/login", url.Values{"csrf": {f.csrf(page)}, "password": {password}, "next": {next}})
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("sign-in = %d, want 303", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "leasehold_session" {
			return resp.Header.Get("Location"), c
		}
	}
	f.t.Fatal("the sign-in set no session cookie")
	return "", nil
}

// With a password, every page but the login page and its assets needs a
// session, which the login page starts: a page sends the browser to it and
// back, the API answers 401.
func TestLoginGuardsEveryPage(t *testing.T) {
	f := setup(t, withPassword)
	for path, want := range map[string]int{"/": 303, "/queues/jobs": 303, "/api/queues": 401, "/static/style.css": 200, "/login": 200} {
		if code, _ := f.get(path); code != want {
			t.Errorf("GET %s without a session = %d, want %d", path, code, want)
		}
	}
	resp, err := f.c.Get(f.url + "/queues/jobs?state=dead")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != "/login?next=%2Fqueues%2Fjobs%3Fstate%3Ddead" {
		t.Fatalf("a page without a session redirects to %q", loc)
	}
	if code, _, _ := f.post("/queues/jobs/pause", url.Values{}); code != 401 {
		t.Fatalf("an action without a session = %d, want 401", code)
	}

	_, page := f.get("/login?next=%2Fqueues%2Fjobs")
	for _, want := range []string{`<label for="password">`, `id="password" name="password"`, `name="next" value="/queues/jobs"`, `autocomplete="current-password"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the login page has no %s:\n%s", want, page)
		}
	}
	token := f.csrf(page)
	// The form needs its CSRF token, and the password.
	code, _, _ := f.post("/login", url.Values{"csrf": {"forged"}, "password": {password}})
	if code != 403 || f.cookie("leasehold_session") != nil {
		t.Fatalf("sign-in with a forged CSRF token = %d, session %v", code, f.cookie("leasehold_session"))
	}
	code, _, body := f.post("/login", url.Values{"csrf": {token}, "password": {"wrong password, long enough"}})
	if code != 401 || f.cookie("leasehold_session") != nil || !strings.Contains(body, "wrong password") {
		t.Fatalf("sign-in with a wrong password = %d, session %v", code, f.cookie("leasehold_session"))
	}

	loc, c := f.signIn("/queues/jobs")
	if loc != "/queues/jobs" {
		t.Fatalf("the sign-in sent the browser to %q, want /queues/jobs", loc)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.MaxAge != int(dashboard.SessionTTL.Seconds()) || c.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over HTTP, MaxAge %s", c, dashboard.SessionTTL)
	}
	code, page = f.get("/")
	if code != 200 || !strings.Contains(page, "Sign out") {
		t.Fatalf("GET / signed in = %d, without a sign-out button", code)
	}

	// Sign-out ends the session in this browser, and needs its token.
	if code, _, _ := f.post("/logout", url.Values{"csrf": {"forged"}}); code != 403 {
		t.Fatalf("sign-out with a forged token = %d, want 403", code)
	}
	code, loc, _ = f.post("/logout", url.Values{"csrf": {f.csrf(page)}})
	if code != 303 || loc != "/login" || f.cookie("leasehold_session") != nil {
		t.Fatalf("sign-out = %d %s, session %v", code, loc, f.cookie("leasehold_session"))
	}
	if code, _ := f.get("/"); code != 303 {
		t.Fatalf("GET / after sign-out = %d, want 303 to the login page", code)
	}
}

// The login form sends the browser only to a path of this server.
func TestLoginRefusesOpenRedirects(t *testing.T) {
	f := setup(t, withPassword)
	for _, next := range []string{"https://evil.example/", "//evil.example/", "/\\evil.example/", "/\t/evil.example/", "/\n/evil.example", "evil.example", ""} {
		if loc, _ := f.signIn(next); loc != "/" {
			t.Errorf("sign-in with next %q went to %q, want /", next, loc)
		}
	}
	_, page := f.get("/login?next=" + url.QueryEscape("//evil.example/"))
	if !strings.Contains(page, `name="next" value="/"`) {
		t.Fatalf("the login page keeps a next of another site:\n%s", page)
	}
}

// A session ends at its expiry; a changed or made-up cookie is no session;
// another server with the same key and password takes it, one with
// another password does not.
func TestSessionsAreSignedAndExpire(t *testing.T) {
	f := setup(t, withPassword)
	_, c := f.signIn("/")
	with := func(h http.Handler, value string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.AddCookie(&http.Cookie{Name: "leasehold_session", Value: value})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	if code := with(f.d.Handler(), c.Value); code != 200 {
		t.Fatalf("the session = %d, want 200", code)
	}
	exp, rest, _ := strings.Cut(c.Value, ".")
	for name, v := range map[string]string{
		"a later expiry": exp + "9" + "." + rest,
		"no MAC":         exp + "." + strings.Split(rest, ".")[0],
		"made up":        "99999999999.AAAA.AAAA",
		"empty":          "",
	} {
		if code := with(f.d.Handler(), v); code != 303 {
			t.Errorf("a session cookie with %s = %d, want 303 to the login page", name, code)
		}
	}
	other := func(pw string) http.Handler {
		key, err := f.st.ServerSecret(context.Background(), "dashboard")
		if err != nil {
			t.Fatal(err)
		}
		d, err := dashboard.New(dashboard.Config{Store: f.st, Clock: f.clk, Logger: slog.New(slog.DiscardHandler), Key: key, Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		return d.Handler()
	}
	if code := with(other(password), c.Value); code != 200 {
		t.Fatalf("another server of the database refused the session: %d", code)
	}
	if code := with(other(password+" changed"), c.Value); code != 303 {
		t.Fatalf("a server with another password took the session: %d", code)
	}
	f.clk.Advance(dashboard.SessionTTL)
	if code := with(f.d.Handler(), c.Value); code != 303 {
		t.Fatalf("the session after its expiry = %d, want 303", code)
	}
}

// Over HTTPS the cookies are Secure.
func TestSecureCookies(t *testing.T) {
	f := setup(t, withPassword, func(c *dashboard.Config) { c.SecureCookies = true })
	// The jar keeps Secure cookies for https URLs only, so the test reads
	// them from the responses.
	jar, _ := cookiejar.New(nil)
	f.c.Jar = jar
	resp, err := f.c.Get(f.url + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var csrf *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "leasehold_csrf" {
			csrf = c
		}
	}
	if csrf == nil || !csrf.Secure || !csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode {
		t.Fatalf("CSRF cookie %+v: want Secure, HttpOnly, SameSite=Strict", csrf)
	}
}

// The dashboard refuses a password too short to resist guessing, and a
// key too short.
func TestConfigRefusesShortSecrets(t *testing.T) {
	f := setup(t)
	key, _ := f.st.ServerSecret(context.Background(), "dashboard")
	for name, cfg := range map[string]dashboard.Config{
		"short password": {Store: f.st, Key: key, Password: "fifteen chars.."},
		"short key":      {Store: f.st, Key: key[:31]},
		"no key":         {Store: f.st},
	} {
		if _, err := dashboard.New(cfg); err == nil {
			t.Errorf("New with a %s: no error", name)
		}
	}
}

// A CSRF token is no after-action message's signature: a token that a
// browser got for a cookie value of its choosing does not make another
// browser's page say what the dashboard did.
func TestCSRFTokenDoesNotSignMessages(t *testing.T) {
	f := setup(t)
	f.enqueue(store.NewMessage{Queue: "jobs", Payload: []byte("a")})
	claim := "purged every queue"
	u, _ := url.Parse(f.url)
	f.c.Jar.SetCookies(u, []*http.Cookie{{Name: "leasehold_csrf", Value: "done:" + claim, Path: "/"}})
	_, page := f.get("/")
	token := f.csrf(page)
	victim := &http.Client{}
	resp, err := victim.Get(f.url + "/?" + url.Values{"done": {claim}, "sig": {token}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), claim) {
		t.Fatal("a CSRF token signed an after-action message")
	}
}

// countingBody counts the bytes read of a body it makes up as it goes.
type countingBody struct {
	n, size int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.n >= b.size {
		return 0, io.EOF
	}
	k := min(int64(len(p)), b.size-b.n)
	for i := range p[:k] {
		p[i] = 'a'
	}
	b.n += k
	return int(k), nil
}

func (b *countingBody) Close() error { return nil }

// A stranger's POST to the sign-in page costs at most a small form: a
// multipart body is refused unread, and a form is read no further than
// its limit, whether it says its length or not. A stranger's POST
// anywhere else is not read at all.
func TestSignInFormIsSmall(t *testing.T) {
	f := setup(t, withPassword)
	for _, tc := range []struct {
		name, contentType string
		length            int64
		want              int
		maxRead           int64
		path              string
	}{
		{"multipart", "multipart/form-data; boundary=x", -1, http.StatusUnsupportedMediaType, 0, ""},
		{"a long form, its length said", "application/x-www-form-urlencoded", 64 << 20, http.StatusRequestEntityTooLarge, 0, ""},
		{"a long form, chunked", "application/x-www-form-urlencoded", -1, http.StatusRequestEntityTooLarge, 4<<10 + 1, ""},
		{"a stranger's action", "application/x-www-form-urlencoded", -1, http.StatusUnauthorized, 0, "/queues/jobs/pause"},
	} {
		body := &countingBody{size: 64 << 20}
		r := httptest.NewRequest(http.MethodPost, cmp.Or(tc.path, "/login"), nil)
		r.Body, r.ContentLength = body, tc.length
		r.Header.Set("Content-Type", tc.contentType)
		w := httptest.NewRecorder()
		f.d.Handler().ServeHTTP(w, r)
		if w.Code != tc.want || body.n > tc.maxRead {
			t.Errorf("%s: %d after reading %d bytes, want %d after at most %d", tc.name, w.Code, body.n, tc.want, tc.maxRead)
		}
	}
}
