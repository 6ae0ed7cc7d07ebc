// Package serve is leasehold's HTTP face on one listener: the SQS API at
// POST /, the dashboard at GET / (and under /queues/), Prometheus metrics
// at GET /metrics, and health at GET /healthz (the process runs) and GET
// /readyz (the database answers). Beside it
// runs the database's upkeep: a reaper that gives back the messages of
// receivers whose visibility timeout ended, and, while this process is
// the database's maintainer, the cleaner of finished messages.
package serve

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/dashboard"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/internal/sigv4"
	"github.com/leasehold/leasehold/internal/sqsapi"
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
)

// Config configures a Server.
type Config struct {
	// Store holds the queues. Required.
	Store store.Store
	// Addr is the address to listen on. Default DefaultAddr. Without
	// credentials it must be a loopback address.
	Addr string
	// AccessKeyID and SecretAccessKey, when set (both or neither), are the
	// credentials every SQS request must be signed with (AWS Signature
	// Version 4).
	AccessKeyID, SecretAccessKey string
	// Region names the region in queue ARNs. Default sqsapi.DefaultRegion.
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
	if c.AccessKeyID == "" && !loopback(addr) {
		return fmt.Errorf("serve: refusing to listen on %s without credentials: set LEASEHOLD_ACCESS_KEY_ID and LEASEHOLD_SECRET_ACCESS_KEY, or listen on a loopback address such as %s", addr, DefaultAddr)
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

	var verifier *sigv4.Verifier
	if cfg.AccessKeyID != "" {
		if verifier, err = sigv4.New(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.Clock); err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
	}
	// One id names this process in the leases its receivers take and in
	// the maintainer election.
	id := mailbox.NewWorkerID()
	api, err := sqsapi.New(sqsapi.Config{Store: cfg.Store, Verifier: verifier, Region: cfg.Region, WorkerID: id, Clock: cfg.Clock,
		Logger: cfg.Logger, MeterProvider: mp, MaxQueues: cfg.MaxQueues})
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
	dash, err := dashboard.New(dashboard.Config{Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s := &Server{cfg: cfg, api: api, dash: dash, maint: maint, stopping: make(chan struct{}), meterClose: mp.Shutdown}
	s.mux = http.NewServeMux()
	s.mux.Handle("POST /{$}", api)
	pages := s.guard(dash.Handler())
	s.mux.Handle("GET /{$}", pages)
	s.mux.Handle("/queues/", pages)
	s.mux.Handle("/api/", pages)
	s.mux.Handle("GET /static/", pages)
	s.mux.Handle("GET /metrics", s.guard(promhttp.HandlerFor(queueMetrics{reg, cfg.Store, cfg.Clock, cfg.Logger}, promhttp.HandlerOpts{})))
	s.mux.Handle("GET /healthz", lifecycle.HealthHandler())
	s.mux.Handle("GET /readyz", lifecycle.HealthHandler(s.ready))
	s.handler = s.mux
	if cfg.AccessKeyID == "" {
		s.handler = localOnly(cfg.Addr, s.mux)
	}
	s.http = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	return s, nil
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

// Handler is the server's handler, for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.handler }

// guard asks for the server's credentials, by HTTP basic authentication
// (the access key id and the secret access key), when it has them: the
// dashboard and the metrics are not signed as SQS requests are.
func (s *Server) guard(h http.Handler) http.Handler {
	if s.cfg.AccessKeyID == "" {
		return h
	}
	user, pass := []byte(s.cfg.AccessKeyID), []byte(s.cfg.SecretAccessKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), user) != 1 || subtle.ConstantTimeCompare([]byte(p), pass) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="leasehold", charset="UTF-8"`)
			http.Error(w, "this needs the server's access key id and secret access key (HTTP basic authentication)", http.StatusUnauthorized)
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

// ready is the readiness check: the server is not stopping and its
// database answers.
func (s *Server) ready(ctx context.Context) error {
	select {
	case <-s.stopping:
		return errors.New("the server is stopping")
	default:
	}
	return s.cfg.Store.Ping(ctx)
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
	s.cfg.Logger.Info("serving the SQS API, the dashboard, /metrics, /healthz and /readyz", "addr", "http://"+s.Addr(),
		"signed", s.cfg.AccessKeyID != "", "reap_interval", s.cfg.ReapInterval)

	var loops sync.WaitGroup
	loops.Go(func() { _ = s.maint.Run(ctx) })
	loops.Go(func() { _ = s.dash.Run(ctx) })
	defer func() {
		_ = s.maint.Shutdown(context.WithoutCancel(ctx))
		_ = s.dash.Shutdown(context.WithoutCancel(ctx))
		loops.Wait()
	}()

	served := make(chan error, 1)
	go func() { served <- s.http.Serve(s.ln) }()
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
