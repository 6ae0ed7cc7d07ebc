package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Check is one health check: nil means healthy. A client's Ready is a
// readiness check (nil unless it is stopping or its store is unreachable);
// a watchdog's Live is a liveness check (nil unless a loop stalled).
type Check func(ctx context.Context) error

// HealthHandler serves 200 "ok" when every check passes and 503 with the
// failures, one per line, otherwise.
func HealthHandler(checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var errs []error
		for _, c := range checks {
			if err := c(r.Context()); err != nil {
				errs = append(errs, err)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if len(errs) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, errors.Join(errs...))
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
}
