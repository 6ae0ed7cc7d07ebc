package leasehold_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
)

// RunAt is a time on the client's clock, turned into a delay at enqueue:
// an hour ahead of the client's clock is an hour after the enqueue by the
// store's, however far the two clocks are apart; a time past runs at once;
// RunAt beside Delay is refused, and nothing is enqueued. Options that set
// RunAt take no Delay from the kind's.
func TestEnqueueRunAt(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		clk := clocktest.New() // years away from the database's clock
		c := clientOf(t, st, leasehold.Config{Clock: clk})
		for _, tc := range []struct {
			args  leasehold.JobArgs
			runAt time.Time
			want  time.Duration
		}{
			{sendEmail{To: "later"}, clk.Now().Add(time.Hour), time.Hour},
			{sendEmail{To: "past"}, clk.Now().Add(-time.Hour), 0},
			{delayed{}, clk.Now().Add(time.Minute), time.Minute},
		} {
			res, err := c.Enqueue(ctx, tc.args, &leasehold.EnqueueOptions{RunAt: tc.runAt})
			if err != nil {
				t.Fatal(err)
			}
			in, err := st.Get(ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := in.VisibleAt.Sub(in.EnqueuedAt); got < tc.want-time.Millisecond || got > tc.want+time.Millisecond {
				t.Fatalf("%s with RunAt %s on a clock at %s: visible %s after its enqueue, want %s", tc.args.Kind(), tc.runAt, clk.Now(), got, tc.want)
			}
		}
		_, err := c.Enqueue(ctx, sendEmail{To: "both"}, &leasehold.EnqueueOptions{Delay: time.Minute, RunAt: clk.Now().Add(time.Hour)})
		if err == nil || !strings.Contains(err.Error(), "both Delay (1m0s) and RunAt") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Enqueue with Delay and RunAt: %v, want a one-line error naming both", err)
		}
		if s := count(t, st, leasehold.DefaultQueue); s.Pending != 3 {
			t.Fatalf("%+v, want the three jobs before the refused one, and no more", s)
		}
	})
}

type delayed struct{}

func (delayed) Kind() string { return "delayed" }

func (delayed) EnqueueOpts() leasehold.EnqueueOptions {
	return leasehold.EnqueueOptions{Delay: 10 * time.Minute}
}
