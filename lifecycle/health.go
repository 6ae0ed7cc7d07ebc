package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/leasehold/leasehold/worker"
)

// Check is one health check: nil means healthy.
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

// LivenessHandler is the watchdog's view: 503 while any loop it watches was
// found stalled at its last check.
func LivenessHandler(wd *worker.Watchdog) http.Handler {
	return HealthHandler(func(context.Context) error {
		stalled := wd.Stalled()
		if len(stalled) == 0 {
			return nil
		}
		names := make([]string, len(stalled))
		for i, s := range stalled {
			names[i] = fmt.Sprintf("%s silent for %s", s.Name, s.Silent)
		}
		return fmt.Errorf("stalled: %s", strings.Join(names, ", "))
	})
}

// ReadinessHandler is 503 while any worker is draining or cannot reach its
// store.
func ReadinessHandler(workers ...*worker.Worker) http.Handler {
	checks := make([]Check, len(workers))
	for i, w := range workers {
		checks[i] = w.Ready
	}
	return HealthHandler(checks...)
}
