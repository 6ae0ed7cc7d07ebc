// Package authlimit slows the client addresses that fail to
// authenticate, on every face of the server that takes a secret (SQS
// signatures, the dashboard's password, the metrics token), and logs
// their failures without letting a flood fill the log.
package authlimit

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// Failed authentication is slowed per client address: each address has
// a budget of failures that refills at a steady rate, and an address
// that has spent it is refused before any secret is checked, until it
// has refilled by one. Guessing a secret then goes at the refill rate,
// not at the speed of the server.
const (
	// Burst is how many failures an address may make at once.
	Burst = 10
	// Refill is how long an address waits for one more try.
	Refill = 500 * time.Millisecond
	// MaxTracked bounds the addresses whose failures are remembered;
	// past it, the least recently failed is forgotten.
	MaxTracked = 10000
	// LogEvery is how often, at most, a failure is logged; the
	// failures in between are counted in the next line.
	LogEvery = time.Second
)

// Limiter is the per-address budget of failed authentications. It is
// safe for concurrent use.
type Limiter struct {
	clk         clock.Clock
	log         *slog.Logger
	behindProxy bool

	mu sync.Mutex
	// addrs holds the budgets of the addresses that failed, by address;
	// order lists them from the least recently failed. Past MaxTracked,
	// the least recently failed is forgotten: an address that fails from
	// a crowd of others gets a fresh budget at worst, and one that never
	// failed is never held back, however many others have.
	addrs    map[string]*list.Element
	order    list.List // of *budget
	logged   time.Duration
	unlogged int
}

// budget is one address's tries left, as of a time.
type budget struct {
	addr  string
	tries float64
	at    time.Duration
}

// Options configures a Limiter.
type Options struct {
	// BehindProxy says that every request comes through a proxy that
	// appends its client's address to X-Forwarded-For: the budget spent
	// is that client's, not the proxy's, which all clients share.
	BehindProxy bool
}

// New returns a limiter on clk that logs to log.
func New(clk clock.Clock, log *slog.Logger, o Options) *Limiter {
	return &Limiter{clk: clk, log: log, behindProxy: o.BehindProxy, addrs: map[string]*list.Element{},
		logged: clk.Monotonic() - LogEvery}
}

// refill brings b up to now.
func (b *budget) refill(now time.Duration) {
	b.tries = min(Burst, b.tries+float64(now-b.at)/float64(Refill))
	b.at = now
}

// Allow reports whether addr may try to authenticate now, and if not,
// how long it is to wait.
func (f *Limiter) Allow(addr string) (bool, time.Duration) {
	now := f.clk.Monotonic()
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.addrs[addr]
	if !ok {
		return true, 0
	}
	b := e.Value.(*budget)
	b.refill(now)
	if b.tries >= 1 {
		return true, 0
	}
	return false, time.Duration((1 - b.tries) * float64(Refill))
}

// Failed spends one try of addr's budget and logs the failure of what
// (an SQS action, a sign-in), unless one was logged within LogEvery.
func (f *Limiter) Failed(addr, what string, err error) {
	now := f.clk.Monotonic()
	f.mu.Lock()
	e, ok := f.addrs[addr]
	if ok {
		f.order.MoveToBack(e)
	} else {
		if len(f.addrs) >= MaxTracked {
			oldest := f.order.Front()
			delete(f.addrs, f.order.Remove(oldest).(*budget).addr)
		}
		e = f.order.PushBack(&budget{addr: addr, tries: Burst, at: now})
		f.addrs[addr] = e
	}
	b := e.Value.(*budget)
	b.refill(now)
	b.tries = max(0, b.tries-1)
	f.unlogged++
	n := f.unlogged
	log := now-f.logged >= LogEvery
	if log {
		f.logged, f.unlogged = now, 0
	}
	f.mu.Unlock()
	if log {
		f.log.Warn("a request failed authentication", "client", addr, "what", what, "error", err,
			"failures_since_last_line", n)
	}
}

// Client is the address whose budget r spends: its client's, as
// ClientAddr tells it, or behind a proxy the last address of
// X-Forwarded-For, the one the proxy added (those before it are the
// client's to say); the proxy's own when there is none.
func (f *Limiter) Client(r *http.Request) string {
	if f.behindProxy {
		if fwd := r.Header.Values("X-Forwarded-For"); len(fwd) > 0 {
			last := fwd[len(fwd)-1]
			last = strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:])
			if ip := net.ParseIP(last); ip != nil {
				return network(ip)
			}
		}
	}
	return ClientAddr(r)
}

// ClientAddr is the address whose budget a request spends: its peer's
// IP address; for IPv6, its /64 network, which one client commonly holds
// whole.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	if ip == nil {
		return host
	}
	return network(ip)
}

// network names the budget of an address: an IPv4 address itself, an
// IPv6 address's /64 network, which one client commonly holds whole.
func network(ip net.IP) string {
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}
