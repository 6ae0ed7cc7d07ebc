// Package dashboard is leasehold's web dashboard: server-rendered pages
// of queues, their messages, their keys and their dead letters, with the
// actions an operator takes on them (pause, resume, redrive, cancel,
// purge). Reads go through the store's indexed queries with limits, so no
// page scans history; every write is a POST with a CSRF token, and the
// dangerous ones go through a confirmation page. Every asset is embedded:
// no build step, no network.
package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultSampleInterval is how often the dashboard samples each queue's
// counts for its throughput chart.
const DefaultSampleInterval = 5 * time.Second

// samples is how many samples a queue's chart shows.
const samples = 60

// pageSize is how many rows a listing shows.
const pageSize = 50

// Config configures a Dashboard.
type Config struct {
	// Store is shown. Required.
	Store store.Store
	// SampleInterval is how often counts are sampled for the throughput
	// charts. Default DefaultSampleInterval.
	SampleInterval time.Duration
	// Clock times the samples and the ages shown. Default: the system
	// clock.
	Clock clock.Clock
	// Logger receives failed requests. Default slog.Default().
	Logger *slog.Logger
}

// Dashboard serves the pages. It is safe for concurrent use; Run samples
// the throughput charts.
type Dashboard struct {
	cfg    Config
	st     store.Store
	clk    clock.Clock
	log    *slog.Logger
	pages  map[string]*template.Template
	secret [32]byte
	mux    *http.ServeMux
	state  runstate.State

	mu      sync.Mutex
	history map[string]*series
}

// New returns the dashboard of cfg.Store.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Store == nil {
		return nil, errors.New("dashboard: Store is nil")
	}
	if cfg.SampleInterval < 0 {
		return nil, errors.New("dashboard: SampleInterval must not be negative")
	}
	if cfg.SampleInterval == 0 {
		cfg.SampleInterval = DefaultSampleInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dashboard{cfg: cfg, st: cfg.Store, clk: clock.OrSystem(cfg.Clock), log: cfg.Logger, history: map[string]*series{}}
	if _, err := rand.Read(d.secret[:]); err != nil {
		return nil, err
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
	m.HandleFunc("POST /queues/{queue}/pause", d.write(d.pause))
	m.HandleFunc("POST /queues/{queue}/resume", d.write(d.resume))
	m.HandleFunc("POST /queues/{queue}/confirm", d.page(d.confirmPage))
	m.HandleFunc("POST /queues/{queue}/apply", d.write(d.apply))
	d.mux = m
}

// Handler serves the dashboard: GET / and the paths under /queues/,
// /api/ and /static/. Whoever reaches it may act on every queue: put it
// behind authentication (leasehold serve does, with its credentials) or on
// loopback only.
func (d *Dashboard) Handler() http.Handler { return http.HandlerFunc(d.serve) }

func (d *Dashboard) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	d.mux.ServeHTTP(w, r)
}

// csrfCookie holds a browser's random value; a form's token is its MAC
// under the process's secret, so a page of another site can neither read
// nor make one.
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
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	return d.mac(v)
}

func (d *Dashboard) mac(v string) string {
	h := hmac.New(sha256.New, d.secret[:])
	h.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
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
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(d.mac(c.Value)))
}

// Run samples every queue's counts each SampleInterval, for the charts,
// until Shutdown is called or ctx ends.
func (d *Dashboard) Run(ctx context.Context) error {
	ok, err := d.state.Begin()
	if !ok {
		return err
	}
	defer d.state.End()
	// The first sample is taken before the ticker starts, so that a
	// ticker that exists means the first sample is in.
	d.sample(ctx)
	t := d.clk.NewTicker(d.cfg.SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.state.Stopping():
			return nil
		case <-t.C():
			d.sample(ctx)
		}
	}
}

// Shutdown stops Run and waits for it, or for ctx to end.
func (d *Dashboard) Shutdown(ctx context.Context) error { return d.state.Shutdown(ctx) }

// Running reports whether Run is running.
func (d *Dashboard) Running() bool { return d.state.Running() }
