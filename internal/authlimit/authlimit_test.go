package authlimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/leasehold/leasehold/clock/clocktest"
)

var errBad = errors.New("bad")

// An address that spends its budget waits for it to refill; others are
// not held back.
func TestBudgetPerAddress(t *testing.T) {
	clk := clocktest.New()
	f := New(clk, slog.New(slog.DiscardHandler), Options{})
	for range Burst {
		if ok, _ := f.Allow("192.0.2.1"); !ok {
			t.Fatal("refused within the budget")
		}
		f.Failed("192.0.2.1", "test", errBad)
	}
	if ok, wait := f.Allow("192.0.2.1"); ok || wait != Refill {
		t.Fatalf("past the budget: allowed %v, wait %s; want refused for %s", ok, wait, Refill)
	}
	if ok, _ := f.Allow("192.0.2.2"); !ok {
		t.Fatal("another address is held back")
	}
	clk.Advance(Refill)
	if ok, _ := f.Allow("192.0.2.1"); !ok {
		t.Fatal("refused after a refill")
	}
}

// Many addresses failing are remembered up to MaxTracked, the least
// recently failed forgotten first; an address that never failed is never
// held back, however many others did.
func TestAddressesStayBounded(t *testing.T) {
	clk := clocktest.New()
	f := New(clk, slog.New(slog.DiscardHandler), Options{})
	spend := func(addr string) {
		for range Burst {
			f.Failed(addr, "test", errBad)
		}
	}
	spend("198.51.100.1")
	for i := range 3 * MaxTracked {
		f.Failed(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), "test", errBad)
		if i == MaxTracked/2 {
			spend("198.51.100.1") // failed again: the most recent, not forgotten
		}
	}
	if len(f.addrs) != MaxTracked || f.order.Len() != MaxTracked {
		t.Fatalf("%d addresses remembered (%d in order), want %d", len(f.addrs), f.order.Len(), MaxTracked)
	}
	if ok, _ := f.Allow("192.0.2.1"); !ok {
		t.Fatal("an address that never failed is held back")
	}
	last := fmt.Sprintf("10.%d.%d.%d", (3*MaxTracked-1)>>16&255, (3*MaxTracked-1)>>8&255, (3*MaxTracked-1)&255)
	if _, ok := f.addrs[last]; !ok {
		t.Fatal("the most recent failure was forgotten")
	}
	spend("203.0.113.9")
	if ok, _ := f.Allow("203.0.113.9"); ok {
		t.Fatal("an address that spent its budget among a crowd is allowed")
	}
}

// Behind a proxy the budget is the client's, the last address the proxy
// added to X-Forwarded-For; without one, the peer's. Two addresses of one
// IPv6 /64 share a budget.
func TestClient(t *testing.T) {
	direct := New(clocktest.New(), slog.New(slog.DiscardHandler), Options{})
	proxied := New(clocktest.New(), slog.New(slog.DiscardHandler), Options{BehindProxy: true})
	req := func(peer string, fwd ...string) *http.Request {
		r := &http.Request{RemoteAddr: peer, Header: http.Header{}}
		for _, v := range fwd {
			r.Header.Add("X-Forwarded-For", v)
		}
		return r
	}
	for _, tc := range []struct {
		f    *Limiter
		r    *http.Request
		want string
	}{
		{direct, req("10.0.0.1:443", "203.0.113.7"), "10.0.0.1"},
		{proxied, req("10.0.0.1:443", "203.0.113.7"), "203.0.113.7"},
		{proxied, req("10.0.0.1:443", "198.51.100.9, 203.0.113.7"), "203.0.113.7"},
		{proxied, req("10.0.0.1:443", "198.51.100.9", "203.0.113.7"), "203.0.113.7"},
		{proxied, req("10.0.0.1:443", "not an address"), "10.0.0.1"},
		{proxied, req("10.0.0.1:443"), "10.0.0.1"},
		{direct, req("[2001:db8::1]:1"), "2001:db8::/64"},
		{proxied, req("10.0.0.1:443", "2001:db8::2"), "2001:db8::/64"},
	} {
		if got := tc.f.Client(tc.r); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q, behind a proxy %v: %s, want %s",
				tc.r.RemoteAddr, tc.r.Header.Values("X-Forwarded-For"), tc.f.behindProxy, got, tc.want)
		}
	}
}
