// Package serve is leasehold's HTTP face on one listener: the SQS API at
// POST / and at queue URLs (and GET with an Action, in the query
// protocol), the dashboard at GET / (and /search, and under /queues/),
// Prometheus metrics at GET /metrics, and health at GET /healthz (the process runs) and GET
// /readyz (the database commits a write within a second). Beside it
// runs the database's upkeep: a reaper that gives back the messages of
// receivers whose visibility timeout ended, and, while this process is
// the database's maintainer, the cleaner of finished messages.
package serve

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/authlimit"
	"github.com/leasehold/leasehold/internal/dashboard"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/internal/sigv4"
	"github.com/leasehold/leasehold/internal/sqsapi"
	"github.com/leasehold/leasehold/internal/sqsid"
	"github.com/leasehold/leasehold/lifecycle"
	"github.com/leasehold/leasehold/store"
)

// Defaults of Config.
const (
	DefaultAddr = "127.0.0.1:9324"
	// DefaultReapInterval is how often the reaper runs: a message whose
	// visibility timeout ended is received again within it.
	DefaultReapInterval = time.Second
	// DefaultShutdownTimeout bounds a graceful stop: requests in flight
	// finish within it, long polls at once.
	DefaultShutdownTimeout = 30 * time.Second
	// maintainerLease is the server's maintainer lease: a server that
	// dies hands the database's upkeep on within it.
	maintainerLease = 30 * time.Second
	// MinSecret is the shortest secret access key, dashboard password and
	// metrics token the server takes.
	MinSecret = 16
	// minServerSecret is the fewest bytes of the database's secret that
	// receipt handles and sessions are keyed with.
	minServerSecret = 32
	// readyTimeout bounds the readiness check: a database that does not
	// answer within it is not ready.
	readyTimeout = time.Second
	// secretTimeout bounds the reading of the server secret at New.
	secretTimeout = 10 * time.Second
	// secretName names the database's secret that every server of it
	// makes its keys of.
	secretName = "serve"
)

// Config configures a Server.
type Config struct {
	// Store holds the queues. Required.
	Store store.Store
	// Addr is the address to listen on. Default DefaultAddr. Without
	// credentials it must be a loopback address; off loopback the server
	// needs TLS (TLSCertFile) or BehindTLSProxy.
	Addr string
	// AccessKeyID and SecretAccessKey, when set (both or neither), are the
	// credentials every SQS request must be signed with (AWS Signature
	// Version 4). The secret is at least MinSecret characters. It never
	// travels: the dashboard and the metrics have secrets of their own.
	AccessKeyID, SecretAccessKey string
	// DashboardPassword, when set, opens the dashboard to whoever signs in
	// with it on its login page; at least MinSecret characters. Without it
	// the dashboard is open on a server without credentials (which
	// listens on loopback only) and closed (403) on one with them.
	DashboardPassword string
	// MetricsToken, when set, is the bearer token GET /metrics asks for
	// (an "Authorization: Bearer" header, as Prometheus sends it); at
	// least MinSecret characters. Without it /metrics is open on a server
	// without credentials and closed (403) on one with them.
	MetricsToken string
	// TLSCertFile and TLSKeyFile, when set (both or neither), are the PEM
	// files of the certificate chain and key the server speaks TLS with.
	// ReloadTLS reads them again.
	TLSCertFile, TLSKeyFile string
	// BehindTLSProxy says that a proxy in front of the server ends TLS,
	// so that plain HTTP on a non-loopback address is allowed. With it, as
	// with TLS, cookies are Secure and responses carry
	// Strict-Transport-Security.
	BehindTLSProxy bool
	// Region names the region in the queue ARNs of unsigned requests; a
	// signed request's ARNs name the region it was signed for. Default
	// sqsapi.DefaultRegion.
	Region string
	// ReapInterval is how often the reaper runs. Default
	// DefaultReapInterval.
	ReapInterval time.Duration
	// CompletedRetention and DeadRetention are how long finished messages
	// are kept, as in a worker (see maintenance.Retention): defaults
	// maintenance.DefaultCompletedRetention and DefaultDeadRetention. The
	// server cleans only while it holds the database's maintainer lease.
	CompletedRetention, DeadRetention time.Duration
	// ShutdownTimeout bounds a graceful stop. Default
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Clock times everything. Default: the system clock.
	Clock clock.Clock
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// MaxConns caps the open connections: past it, a new connection
	// evicts the oldest one not in a request. Default: the file
	// descriptor limit (raised to its hard limit at start) less a tenth
	// of it, at least 128, and at most 10,000.
	MaxConns int
	// MaxBufferedBytes bounds the SQS request bodies held in memory at
	// once. Default sqsapi.DefaultMaxBufferedBytes.
	MaxBufferedBytes int64
	// MaxQueues bounds the queues: CreateQueue of a new queue when the
	// store holds this many is refused with OverLimit (see
	// sqsapi.Config.MaxQueues). /metrics exports the depth of every
	// queue, however many; the metrics kept by queue in OpenTelemetry
	// (the reaper's counts) keep series for twice as many queues before
	// they fold the rest into an overflow series. Default
	// sqsapi.DefaultMaxQueues; must not be negative.
	MaxQueues int
}

// Server serves leasehold over HTTP. It is a lifecycle.Runnable.
type Server struct {
	cfg   Config
	api   *sqsapi.API
	dash  *dashboard.Dashboard
	maint *maintenance.Maintenance
	mux   *http.ServeMux
	// handler is mux behind the check of the Host header.
	handler http.Handler
	http    *http.Server
	state   runstate.State

	mu sync.Mutex
	ln net.Listener

	conns *conns
	// readiness shares the database's write check among /readyz's
	// callers.
	readiness readiness
	// cert is the TLS certificate served to new connections.
	cert atomic.Pointer[tls.Certificate]

	stopping   chan struct{}
	stopOnce   sync.Once
	meterClose func(context.Context) error
}

var _ lifecycle.Runnable = (*Server)(nil)

// Check reports a setting of c that cannot work, Store aside: the
// credentials, the address, the intervals and the retentions.
func (c Config) Check() error {
	addr := cmp.Or(c.Addr, DefaultAddr)
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return errors.New("serve: set both the access key id and the secret access key, or neither")
	}
	for _, s := range []struct{ name, value string }{{"the secret access key", c.SecretAccessKey},
		{"the dashboard password", c.DashboardPassword}, {"the metrics token", c.MetricsToken}} {
		if s.value != "" && len(s.value) < MinSecret {
			return fmt.Errorf("serve: %s has %d characters, needs at least %d", s.name, len(s.value), MinSecret)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("serve: set both the TLS certificate and the TLS key, or neither")
	}
	if c.AccessKeyID == "" && !loopback(addr) {
		return fmt.Errorf("serve: refusing to listen on %s without credentials: set LEASEHOLD_ACCESS_KEY_ID and LEASEHOLD_SECRET_ACCESS_KEY, or listen on a loopback address such as %s", addr, DefaultAddr)
	}
	if !c.tls() && !c.BehindTLSProxy && !loopback(addr) {
		return fmt.Errorf("serve: refusing plain HTTP on %s: set --tls-cert and --tls-key, or --behind-tls-proxy when a proxy in front ends TLS", addr)
	}
	if c.MaxConns < 0 || c.MaxBufferedBytes < 0 {
		return fmt.Errorf("serve: MaxConns (%d) and MaxBufferedBytes (%d) must not be negative", c.MaxConns, c.MaxBufferedBytes)
	}
	if c.MaxQueues < 0 {
		return fmt.Errorf("serve: MaxQueues (%d) must not be negative", c.MaxQueues)
	}
	if c.ReapInterval < 0 || c.ShutdownTimeout < 0 {
		return fmt.Errorf("serve: ReapInterval (%s) and ShutdownTimeout (%s) must not be negative", c.ReapInterval, c.ShutdownTimeout)
	}
	if err := c.retention().Check(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// tls reports whether the server speaks TLS itself.
func (c Config) tls() bool { return c.TLSCertFile != "" }

// https reports whether browsers reach the server over HTTPS.
func (c Config) https() bool { return c.tls() || c.BehindTLSProxy }

// retention is what the server's cleaner keeps, defaults filled in.
func (c Config) retention() maintenance.Retention {
	return maintenance.Retention{Completed: cmp.Or(c.CompletedRetention, maintenance.DefaultCompletedRetention),
		Dead: cmp.Or(c.DeadRetention, maintenance.DefaultDeadRetention)}
}

// New returns a server for cfg; it listens when Listen or Run is called.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("serve: Store is nil")
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cfg.Addr = cmp.Or(cfg.Addr, DefaultAddr)
	cfg.ReapInterval = cmp.Or(cfg.ReapInterval, DefaultReapInterval)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.Clock = clock.OrSystem(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("serve: metrics: %w", err)
	}
	cfg.MaxQueues = cmp.Or(cfg.MaxQueues, sqsapi.DefaultMaxQueues)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithCardinalityLimit(maintenance.SeriesLimit(2*cfg.MaxQueues)))

	// Every server of the database makes its keys of one secret, so that
	// a receipt handle or a session one issued another accepts.
	sctx, cancel := clock.WithTimeout(context.Background(), cfg.Clock, secretTimeout)
	secret, err := cfg.Store.ServerSecret(sctx, secretName)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("serve: the server secret: %w", err)
	}
	if len(secret) < minServerSecret {
		// The store makes 32 random bytes; fewer are a row someone wrote.
		return nil, fmt.Errorf("serve: the database's server secret %q has %d bytes, want at least %d: delete its row and the server makes a new one", secretName, len(secret), minServerSecret)
	}

	ids, err := sqsid.New(secret)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}

	var cert *tls.Certificate
	if cfg.tls() {
		if cert, err = cfg.loadTLS(); err != nil {
			return nil, err
		}
	}

	var verifier *sigv4.Verifier
	if cfg.AccessKeyID != "" {
		if verifier, err = sigv4.New(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.Clock); err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
	}
	// One id names this process in the leases its receivers take and in
	// the maintainer election.
	id := mailbox.NewWorkerID()
	// One budget of failed authentication per client address, whichever
	// face's secret it guesses.
	limiter := authlimit.New(cfg.Clock, cfg.Logger, authlimit.Options{BehindProxy: cfg.BehindTLSProxy})
	api, err := sqsapi.New(sqsapi.Config{Store: cfg.Store, Verifier: verifier, ReceiptKey: derive(secret, "receipt handles"), MessageIDs: ids, Region: cfg.Region, WorkerID: id, Clock: cfg.Clock,
		Logger: cfg.Logger, MeterProvider: mp, MaxBufferedBytes: cfg.MaxBufferedBytes, MaxQueues: cfg.MaxQueues, AuthLimiter: limiter,
		BehindTLSProxy: cfg.BehindTLSProxy})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	meter := maintenance.Meter(mp)
	retention := cfg.retention()
	maint, err := maintenance.New(maintenance.Config{Deps: maintenance.Deps{Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, Meter: meter},
		ID: id, LeaseDuration: maintainerLease, ReapInterval: cfg.ReapInterval, AlwaysReap: true, Retention: &retention})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	dash, err := dashboard.New(dashboard.Config{Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, Key: derive(secret, "dashboard"),
		Password: cfg.DashboardPassword, SecureCookies: cfg.https(), AuthLimiter: limiter, MessageIDs: ids})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s := &Server{cfg: cfg, api: api, dash: dash, maint: maint, stopping: make(chan struct{}), meterClose: mp.Shutdown}
	if cert != nil {
		s.cert.Store(cert)
	}
	s.mux = http.NewServeMux()
	pages := s.guard(dash.Handler(), cfg.DashboardPassword != "", "the dashboard", "LEASEHOLD_DASHBOARD_PASSWORD")
	// The API answers POST / and, as SQS does, POSTs to a queue's URL;
	// a GET of either is the API's only when it names an action in its
	// URL (the query protocol), else the dashboard's page or not found.
	s.mux.Handle("POST /{$}", api)
	s.mux.Handle("GET /{$}", apiOr(api, pages))
	queuePath := "/" + api.AccountID() + "/{queue}"
	s.mux.Handle("POST "+queuePath, api)
	s.mux.Handle("GET "+queuePath, apiOr(api, http.HandlerFunc(unknownOperation)))
	s.mux.Handle("/queues/", pages)
	s.mux.Handle("/api/", pages)
	s.mux.Handle("GET /search", pages)
	s.mux.Handle("GET /static/", pages)
	s.mux.Handle("/login", pages)
	s.mux.Handle("POST /logout", pages)
	metrics := promhttp.HandlerFor(queueMetrics{reg, cfg.Store, cfg.Clock, cfg.Logger}, promhttp.HandlerOpts{})
	if cfg.MetricsToken != "" {
		metrics = bearer(cfg.MetricsToken, limiter, metrics)
	}
	s.mux.Handle("GET /metrics", s.guard(metrics, cfg.MetricsToken != "", "GET /metrics", "LEASEHOLD_METRICS_TOKEN"))
	s.mux.Handle("GET /healthz", lifecycle.HealthHandler())
	s.mux.Handle("GET /readyz", lifecycle.HealthHandler(s.ready))
	s.handler = s.mux
	if cfg.AccessKeyID == "" {
		s.handler = localOnly(cfg.Addr, s.mux)
	}
	if cfg.https() {
		s.handler = strictTransport(s.handler)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = connLimit()
		s.cfg.MaxConns = cfg.MaxConns
	}
	s.conns = newConns(cfg.MaxConns)
	// HTTP/1.1 only, over TLS too: under HTTP/2, net/http buffers uploads
	// itself and ReadHeaderTimeout does not apply, so the limits above
	// would not hold.
	var http1 http.Protocols
	http1.SetHTTP1(true)
	s.http = &http.Server{Handler: deadlines(s.handler, bodyTimeout, maxLongPoll+writeTimeout), ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout,
		MaxHeaderBytes: maxHeaderBytes, ConnState: s.conns.state, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		Protocols: &http1}
	s.http.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil }}
	return s, nil
}

// MessageIDs returns how the servers of st's database map its message
// ids to the SQS API's, for whatever shows messages beside them. It reads
// the database's server secret, and makes it when no server has yet.
func MessageIDs(ctx context.Context, st store.Store) (sqsid.Mapper, error) {
	secret, err := st.ServerSecret(ctx, secretName)
	if err != nil {
		return sqsid.Mapper{}, fmt.Errorf("the server secret: %w", err)
	}
	return sqsid.New(secret)
}

// derive returns the key for one purpose, made from the database's
// secret, so that what is signed for one purpose is good for no other.
func derive(secret []byte, purpose string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("leasehold serve " + purpose))
	return h.Sum(nil)
}

// ReloadTLS reads the TLS certificate and key files again; new
// connections get the pair read. A pair that does not load is an error
// and the server keeps the one it has.
func (s *Server) ReloadTLS() error {
	if !s.cfg.tls() {
		return errors.New("serve: no TLS certificate and key to reload: the server speaks plain HTTP")
	}
	cert, err := s.cfg.loadTLS()
	if err != nil {
		return err
	}
	s.cert.Store(cert)
	return nil
}

// loadTLS reads the TLS certificate and key files.
func (c Config) loadTLS() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("serve: TLS certificate %s and key %s: %w", c.TLSCertFile, c.TLSKeyFile, err)
	}
	return &cert, nil
}

// strictTransport tells browsers to reach this host over HTTPS only.
func strictTransport(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		h.ServeHTTP(w, r)
	})
}

// loopback reports whether addr's host is a loopback address or localhost.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiOr sends the SQS API's requests to api and the others to h.
func apiOr(api, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sqsapi.IsRequest(r) {
			api.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// unknownOperation answers a GET of a queue's URL that names no action
// as Amazon SQS does: not found, with an XML body that says why.
func unknownOperation(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `<?xml version="1.0"?><UnknownOperationException/>`)
}

// Handler is the server's handler, for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.handler }

// guard keeps a face of the server (the dashboard, the metrics) closed
// on a server with credentials unless that face has a secret of its own
// (open tells), which h then asks for: the SQS credentials never open
// it, so that the secret access key never travels. A server without
// credentials listens on loopback only, and its faces stay open.
func (s *Server) guard(h http.Handler, open bool, face, env string) http.Handler {
	if open || s.cfg.AccessKeyID == "" {
		return h
	}
	msg := fmt.Sprintf("%s is closed on a server with credentials: set %s to open it", face, env)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, msg, http.StatusForbidden)
	})
}

// bearer asks for token as an "Authorization: Bearer" header. An address
// that has failed too often is refused (429) before the token is looked
// at.
func bearer(token string, limiter *authlimit.Limiter, h http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := limiter.Client(r)
		if ok, wait := limiter.Allow(addr); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			http.Error(w, "too many requests from "+addr+" failed authentication; retry later", http.StatusTooManyRequests)
			return
		}
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			limiter.Failed(addr, "GET /metrics", errors.New("no metrics token, or a wrong one"))
			w.Header().Set("WWW-Authenticate", `Bearer realm="leasehold"`)
			http.Error(w, "this needs the metrics token as an \"Authorization: Bearer\" header", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// localOnly answers only requests whose Host names this machine: a
// loopback address, localhost, or the address listened on. A server
// without credentials trusts whoever reaches it, and listens on loopback
// for that reason; this keeps a web page elsewhere from reaching it
// through a name of its own that resolves to 127.0.0.1 (DNS rebinding).
func localOnly(listen string, h http.Handler) http.Handler {
	listenHost, _, _ := net.SplitHostPort(listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		host = strings.Trim(host, "[]")
		ip := net.ParseIP(host)
		if !strings.EqualFold(host, "localhost") && host != listenHost && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, "this server takes requests for localhost or a loopback address only: it has no credentials set", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Listen opens the listener, if Run has not yet; then Addr tells where it
// listens.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.ln = ln
	return nil
}

// Addr is the address the server listens on, once it does; else the
// configured one.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.cfg.Addr
}

// Run serves until Shutdown is called or ctx ends. A Shutdown stops
// gracefully: long polls return at once with what they have, and requests
// in flight finish within ShutdownTimeout. An ended ctx closes every
// connection at once.
func (s *Server) Run(ctx context.Context) error {
	ok, err := s.state.Begin()
	if !ok {
		return err
	}
	defer s.state.End()
	defer s.closeMetrics()
	if err := s.Listen(); err != nil {
		return err
	}
	scheme := "http://"
	if s.cfg.tls() {
		scheme = "https://"
	}
	s.cfg.Logger.Info("serving the SQS API, the dashboard, /metrics, /healthz and /readyz", "addr", scheme+s.Addr(),
		"signed", s.cfg.AccessKeyID != "", "dashboard_password", s.cfg.DashboardPassword != "", "metrics_token", s.cfg.MetricsToken != "",
		"reap_interval", s.cfg.ReapInterval, "max_conns", s.cfg.MaxConns)

	var loops sync.WaitGroup
	loops.Go(func() { _ = s.maint.Run(ctx) })
	// The message move tasks stop with the server, and go on in the next
	// one, or in another server of the database.
	moves, stopMoves := context.WithCancel(ctx)
	loops.Go(func() { _ = s.api.RunMoveTasks(moves) })
	defer func() {
		stopMoves()
		_ = s.maint.Shutdown(context.WithoutCancel(ctx))
		loops.Wait()
	}()

	served := make(chan error, 1)
	go func() {
		if s.cfg.tls() {
			served <- s.http.ServeTLS(s.ln, "", "")
			return
		}
		served <- s.http.Serve(s.ln)
	}()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		s.stop()
		_ = s.http.Close()
		<-served
		return nil
	case <-s.state.Stopping():
	}
	s.stop()
	sctx, cancel := clock.WithTimeout(ctx, s.cfg.Clock, s.cfg.ShutdownTimeout)
	defer cancel()
	err = s.http.Shutdown(sctx)
	if err != nil {
		_ = s.http.Close()
		err = fmt.Errorf("serve: requests still running after %s were cut off: %w", s.cfg.ShutdownTimeout, err)
	}
	if e := <-served; !errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	return err
}

// stop marks the server stopping and ends its long polls.
func (s *Server) stop() {
	s.stopOnce.Do(func() {
		close(s.stopping)
		s.api.Drain()
	})
}

func (s *Server) closeMetrics() {
	_ = s.meterClose(context.Background())
}

// Shutdown stops Run gracefully and waits for it, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	return s.state.Shutdown(ctx)
}

// Running reports whether Run is running.
func (s *Server) Running() bool { return s.state.Running() }
