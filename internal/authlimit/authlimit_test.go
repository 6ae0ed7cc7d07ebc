package authlimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/leasehold/leasehold/clock/clocktest"
)

// Many addresses failing remember at most MaxTracked of them; the
// rest share one budget, so together they guess no faster than one.
func TestAuthFailuresStayBounded(t *testing.T) {
	clk := clocktest.New()
	f := New(clk, slog.New(slog.DiscardHandler))
	for i := range 3 * MaxTracked {
		addr := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		f.Failed(addr, "ListQueues", errors.New("bad"))
	}
	if len(f.addrs) != MaxTracked {
		t.Fatalf("%d addresses remembered, want %d", len(f.addrs), MaxTracked)
	}
	if ok, _ := f.Allow("192.0.2.1"); ok {
		t.Fatal("a new address while the shared budget is spent is allowed")
	}
	clk.Advance(Burst * Refill)
	f.Failed("192.0.2.1", "ListQueues", errors.New("bad"))
	if len(f.addrs) != 1 {
		t.Fatalf("after the budgets refilled: %d addresses remembered, want only the new one", len(f.addrs))
	}
	if a, b := ClientAddr(&http.Request{RemoteAddr: "[2001:db8::1]:1"}), ClientAddr(&http.Request{RemoteAddr: "[2001:db8::2]:2"}); a != b {
		t.Errorf("two addresses of one IPv6 /64 have budgets %s and %s", a, b)
	}
}
