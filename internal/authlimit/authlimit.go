// Package authlimit slows the client addresses that fail to
// authenticate, on every face of the server that takes a secret (SQS
// signatures, the dashboard's password, the metrics token), and logs
// their failures without letting a flood fill the log.
package authlimit

import (
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
	// MaxTracked bounds the addresses whose failures are
	// remembered. Past it, the addresses not remembered share one
	// budget: many addresses guess together no faster than one.
	MaxTracked = 10000
	// LogEvery is how often, at most, a failure is logged; the
	// failures in between are counted in the next line.
	LogEvery = time.Second
)

// Limiter is the per-address budget of failed authentications. It is
// safe for concurrent use.
type Limiter struct {
	clk clock.Clock
	log *slog.Logger

	mu       sync.Mutex
	addrs    map[string]*budget
	shared   budget // of the addresses not in addrs when it is full
	pruned   time.Duration
	logged   time.Duration
	unlogged int
}

// budget is one address's tries left, as of a time.
type budget struct {
	tries float64
	at    time.Duration
}

// New returns a limiter on clk that logs to log.
func New(clk clock.Clock, log *slog.Logger) *Limiter {
	now := clk.Monotonic()
	return &Limiter{clk: clk, log: log, addrs: map[string]*budget{}, shared: budget{Burst, now},
		pruned: now, logged: now - LogEvery}
}

// refill brings b up to now.
func (b *budget) refill(now time.Duration) {
	b.tries = min(Burst, b.tries+float64(now-b.at)/float64(Refill))
	b.at = now
}

// of returns addr's budget: its own, or the shared one when addr has
// none and there is no room for it. With create, an address is given a
// budget of its own if there is room.
func (f *Limiter) of(addr string, now time.Duration, create bool) *budget {
	if b, ok := f.addrs[addr]; ok {
		return b
	}
	if len(f.addrs) >= MaxTracked && now-f.pruned >= Refill*Burst {
		// Forget the addresses whose budget is whole again: they are as
		// if never seen. At most once per refill of a whole budget, so
		// that pruning costs little under a flood.
		f.pruned = now
		for a, b := range f.addrs {
			if b.refill(now); b.tries >= Burst {
				delete(f.addrs, a)
			}
		}
	}
	if len(f.addrs) >= MaxTracked {
		return &f.shared
	}
	if !create {
		return nil
	}
	b := &budget{Burst, now}
	f.addrs[addr] = b
	return b
}

// Allow reports whether addr may try to authenticate now, and if not,
// how long it is to wait.
func (f *Limiter) Allow(addr string) (bool, time.Duration) {
	now := f.clk.Monotonic()
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.of(addr, now, false)
	if b == nil {
		return true, 0
	}
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
	b := f.of(addr, now, true)
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
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}
