package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// WaitUntil checks cond every interval on clk until cond returns true or
// timeout has passed on clk's monotonic time, then checks it once more. It
// reports whether cond became true. It returns an error, and stops early,
// when ctx ends or when timeout is negative or interval not positive. A nil
// clk is the system clock.
//
// With timeout 2s and interval 0.5s, a cond that never holds is checked at
// 0, 0.5, 1 and 1.5 seconds and once more at 2 seconds: five checks.
func WaitUntil(ctx context.Context, clk clock.Clock, timeout, interval time.Duration, cond func() bool) (bool, error) {
	if timeout < 0 {
		return false, fmt.Errorf("lifecycle: wait timeout is %s, must not be negative", timeout)
	}
	if interval <= 0 {
		return false, fmt.Errorf("lifecycle: wait interval is %s, must be positive", interval)
	}
	clk = clock.OrSystem(clk)
	deadline := clk.Monotonic() + timeout
	for clk.Monotonic() < deadline {
		if cond() {
			return true, nil
		}
		if err := clk.Sleep(ctx, min(interval, deadline-clk.Monotonic())); err != nil {
			return false, err
		}
	}
	return cond(), nil
}
