// Package dashboard is leasehold's web dashboard: server-rendered pages
// of queues, their messages, their keys, their dead letters and their
// scheduled messages, a search by id, kind or key, and charts of the
// throughput the store keeps, with the actions an operator takes on them
// (pause, resume, redrive, cancel, purge). Reads go through the store's indexed queries with limits, so no
// page scans history; every write is a POST with a CSRF token, and the
// dangerous ones go through a confirmation page. Every asset is embedded:
// no build step, no network.
package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/authlimit"
	"github.com/leasehold/leasehold/internal/sqsid"
	"github.com/leasehold/leasehold/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageSize is how many rows a listing shows.
const pageSize = 50

// Config configures a Dashboard.
type Config struct {
	// Store is shown. Required.
	Store store.Store
	// Clock times the ages shown and the charts' stretches. Default: the
	// system clock.
	Clock clock.Clock
	// Logger receives failed requests. Default slog.Default().
	Logger *slog.Logger
	// Key keys the MACs of the dashboard's CSRF tokens, its after-action
	// messages and its sessions, each under a key of its own made from
	// it; at least MinKey bytes. Required. Servers that share a database
	// share it, so that a browser may be sent to any of them.
	Key []byte
	// Password, when set, is what the login page asks for: every page but
	// the login page then needs a session, which signing in starts (see
	// SessionTTL). At least MinPassword characters. Empty: no login, and
	// whoever reaches the dashboard may act on every queue.
	Password string
	// SecureCookies marks the dashboard's cookies Secure, so that a
	// browser sends them over HTTPS only: set it when the dashboard is
	// reached over HTTPS.
	SecureCookies bool
	// AuthLimiter slows the client addresses whose sign-ins fail; a
	// server shares one among its faces. Default: one of the dashboard's
	// own.
	AuthLimiter *authlimit.Limiter
	// MessageIDs gives each message's SQS message id, shown beside its
	// id. The zero Mapper shows none.
	MessageIDs sqsid.Mapper
}

// MinKey is the shortest Config.Key.
const MinKey = 32

// Dashboard serves the pages. It is safe for concurrent use. It keeps
// nothing between requests: its charts read the throughput the store
// keeps (see store.Store.Throughput).
type Dashboard struct {
	cfg   Config
	st    store.Store
	clk   clock.Clock
	log   *slog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
	// csrfKey, flashKey and sessionKey are made from Config.Key, one per
	// purpose.
	csrfKey, flashKey, sessionKey []byte
	signIns                       *authlimit.Limiter
}

// New returns the dashboard of cfg.Store.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Store == nil {
		return nil, errors.New("dashboard: Store is nil")
	}
	if len(cfg.Key) < MinKey {
		return nil, fmt.Errorf("dashboard: Key has %d bytes, needs at least %d", len(cfg.Key), MinKey)
	}
	if cfg.Password != "" && len(cfg.Password) < MinPassword {
		return nil, fmt.Errorf("dashboard: Password has %d characters, needs at least %d", len(cfg.Password), MinPassword)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dashboard{cfg: cfg, st: cfg.Store, clk: clock.OrSystem(cfg.Clock), log: cfg.Logger,
		csrfKey: derive(cfg.Key, "csrf"), flashKey: derive(cfg.Key, "flash"), sessionKey: sessionKeyFor(cfg.Key, cfg.Password),
		signIns: cfg.AuthLimiter}
	if d.signIns == nil {
		d.signIns = authlimit.New(d.clk, d.log, authlimit.Options{})
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	d.pages = pages
	d.routes()
	return d, nil
}

func (d *Dashboard) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	m.HandleFunc("GET /{$}", d.page(d.queuesPage))
	m.HandleFunc("GET /api/queues", d.apiQueues)
	m.HandleFunc("GET /queues/{queue}", d.page(d.queuePage))
	m.HandleFunc("GET /queues/{queue}/messages/{id}", d.page(d.messagePage))
	m.HandleFunc("GET /queues/{queue}/keys", d.page(d.keysPage))
	m.HandleFunc("GET /queues/{queue}/dead", d.page(d.deadPage))
	m.HandleFunc("GET /queues/{queue}/scheduled", d.page(d.scheduledPage))
	m.HandleFunc("GET /search", d.page(d.searchPage))
	m.HandleFunc("POST /queues/{queue}/pause", d.write(d.pause))
	m.HandleFunc("POST /queues/{queue}/resume", d.write(d.resume))
	m.HandleFunc("POST /queues/{queue}/confirm", d.page(d.confirmPage))
	m.HandleFunc("POST /queues/{queue}/apply", d.write(d.apply))
	if d.cfg.Password != "" {
		m.HandleFunc("GET /login", d.page(d.loginPage))
		m.HandleFunc("POST /login", d.login)
		m.HandleFunc("POST /logout", d.logout)
	}
	d.mux = m
}

// Handler serves the dashboard: GET / and /search, and the paths under
// /queues/, /api/ and /static/, and /login and /logout when it has a password.
// Without a password, whoever reaches it may act on every queue: keep it
// on loopback only.
func (d *Dashboard) Handler() http.Handler { return http.HandlerFunc(d.serve) }

func (d *Dashboard) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	if d.cfg.Password != "" && !public(r.URL.Path) && !d.signedIn(r) {
		if r.ContentLength != 0 {
			endUnread(w) // a stranger's body is never read
		}
		d.toLogin(w, r)
		return
	}
	if r.Method == http.MethodPost && !d.readForm(w, r) {
		return
	}
	d.mux.ServeHTTP(w, r)
}

// endUnread ends the request's connection with its answer, what is left
// of its body unread: the read deadline passes at once, so that net/http,
// which reads some of a body left unread once the handler is done, reads
// none of it.
func endUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
}

// The largest form the dashboard reads: a sign-in, or a page's selection
// of messages (at most a page of ids, with their confirmation).
const (
	maxSignInForm = 4 << 10
	maxForm       = 64 << 10
)

// readForm reads a POST's form, once the session is checked and before
// anything else looks at it, and answers the request itself when it
// cannot: the dashboard's forms are URL-encoded (a multipart body, which
// could spill files to disk, is refused) and small, and the sign-in
// form, which a stranger may send, smallest of all.
func (d *Dashboard) readForm(w http.ResponseWriter, r *http.Request) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		endUnread(w)
		http.Error(w, "the dashboard's forms are sent as application/x-www-form-urlencoded", http.StatusUnsupportedMediaType)
		return false
	}
	limit := int64(maxForm)
	if public(r.URL.Path) {
		limit = maxSignInForm
	}
	if r.ContentLength > limit {
		endUnread(w)
		http.Error(w, fmt.Sprintf("the form is over %d bytes", limit), http.StatusRequestEntityTooLarge)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			endUnread(w)
			http.Error(w, fmt.Sprintf("the form is over %d bytes", limit), http.StatusRequestEntityTooLarge)
			return false
		}
		http.Error(w, "the form cannot be read: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// csrfCookie holds a browser's random value; a form's token is its MAC
// under the CSRF key, so a page of another site can neither read nor make
// one.
const csrfCookie = "leasehold_csrf"

// csrfToken returns the token for the forms of a page, setting the
// browser's cookie when it has none.
func (d *Dashboard) csrfToken(w http.ResponseWriter, r *http.Request) string {
	v := ""
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 16 {
		v = c.Value
	} else {
		var b [18]byte
		_, _ = rand.Read(b[:])
		v = base64.RawURLEncoding.EncodeToString(b[:])
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, Secure: d.cfg.SecureCookies,
			SameSite: http.SameSiteStrictMode})
	}
	return sign(d.csrfKey, v)
}

// checkCSRF reports whether a POST carries the token of its browser's
// cookie and does not come from another site.
func (d *Dashboard) checkCSRF(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(sign(d.csrfKey, c.Value)))
}
