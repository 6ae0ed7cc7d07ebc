package storetest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// EnvBig turns on the tests that fill a store with a big history, which
// take a minute or more: set it to 1.
const EnvBig = "LEASEHOLD_BIG"

// SkipUnlessBig skips the test unless EnvBig is 1.
func SkipUnlessBig(t *testing.T) {
	t.Helper()
	if os.Getenv(EnvBig) != "1" {
		t.Skipf("%s is not 1: the store is not filled with a big history", EnvBig)
	}
}

// BigHistory is how many completed messages a backend's big test writes
// into one queue before MeasureBrowsing: every other one with a key of
// BigHistoryKey's form, each of kind "email".
const BigHistory = 1_000_000

// BigHistoryKey is the key of the i-th completed message of the big
// history, for i even: one of 5,000 keys.
func BigHistoryKey(i int) string { return fmt.Sprint("k", i%5000) }

// MeasureBrowsing times the reads a dashboard makes on s, whose queue
// holds BigHistory completed messages. It first adds a few hundred live
// messages through s (100 keys with two messages waiting behind each head,
// some heads processing, ten dead, five cancelled, and 100 messages
// without a key), then runs each read once to warm the caches and runs
// more times, logging the median and the slowest run. It fails the test
// when what a queues page reads, Queues and the Stats of each queue, takes
// 200 ms or more at the median.
func MeasureBrowsing(t *testing.T, s store.Store, queue string) {
	t.Helper()
	ctx := context.Background()
	var msgs []store.NewMessage
	for i := range 300 {
		msgs = append(msgs, store.NewMessage{Queue: queue, Key: fmt.Sprint("live", i%100), Kind: "email", Payload: []byte("live")})
	}
	for range 100 {
		msgs = append(msgs, store.NewMessage{Queue: queue, Kind: "sms", Payload: []byte("live")})
	}
	res, err := s.Enqueue(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.Claim(ctx, store.Claim{Queue: queue, WorkerID: "measure", Max: 50, LeaseDuration: time.Hour})
	if err != nil || len(ds) != 50 {
		t.Fatalf("Claim = %d, %v", len(ds), err)
	}
	for _, d := range ds[:10] {
		if _, err := s.Fail(ctx, store.Failure{Lease: d.Lease, Error: "measured", Permanent: true}); err != nil {
			t.Fatal(err)
		}
	}
	var cancel []int64
	for _, r := range res[len(res)-5:] {
		cancel = append(cancel, r.ID)
	}
	if _, err := s.Cancel(ctx, queue, cancel); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	if st.Completed < BigHistory {
		t.Fatalf("the queue holds %d completed messages, want %d", st.Completed, BigHistory)
	}
	t.Logf("queue %s: %d completed, %d pending, %d waiting, %d processing, %d dead, %d cancelled",
		queue, st.Completed, st.Pending, st.Waiting, st.Processing, st.Dead, st.Cancelled)

	list := func(f store.ListFilter, want int) func() error {
		f.Queue = queue
		return func() error {
			infos, err := s.List(ctx, f)
			if err == nil && len(infos) != want {
				err = fmt.Errorf("List(%+v) listed %d, want %d", f, len(infos), want)
			}
			return err
		}
	}
	queuesPage := func() error {
		qs, err := s.Queues(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(qs, queue) {
			return fmt.Errorf("Queues = %v, without %s", qs, queue)
		}
		for _, q := range qs {
			if _, err := s.Stats(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	newest := res[len(res)-1].ID + 1
	for _, r := range []struct {
		what string
		fn   func() error
	}{
		{"Queues", func() error { _, err := s.Queues(ctx); return err }},
		{"Stats", func() error { _, err := s.Stats(ctx, queue); return err }},
		{"queues page: Queues + Stats of each queue", queuesPage},
		{"List pending, first page", list(store.ListFilter{State: store.Pending}, 100)},
		{"List completed, first page", list(store.ListFilter{State: store.Completed}, 100)},
		{"List completed, newest page (BeforeID)", list(store.ListFilter{State: store.Completed, BeforeID: newest}, 100)},
		{"List completed, page at the middle (AfterID)", list(store.ListFilter{State: store.Completed, AfterID: BigHistory / 2}, 100)},
		{"List completed with a key", list(store.ListFilter{State: store.Completed, Key: BigHistoryKey(42)}, 100)},
		{"List completed of a common kind", list(store.ListFilter{State: store.Completed, Kind: "email"}, 100)},
		{"List completed of a kind it does not hold", list(store.ListFilter{State: store.Completed, Kind: "absent"}, 0)},
		{"List dead for a reason", list(store.ListFilter{State: store.Dead, Reason: store.ReasonPermanent}, 10)},
		{"BlockedKeys, first page", func() error {
			keys, err := s.BlockedKeys(ctx, queue, "", 0)
			if err == nil && (len(keys) != 100 || keys[0].Head.ID == 0) {
				err = fmt.Errorf("BlockedKeys listed %d keys, want 100 with heads", len(keys))
			}
			return err
		}},
		{"Get", func() error { _, err := s.Get(ctx, BigHistory/2); return err }},
	} {
		median, slowest := timeRuns(t, r.what, r.fn)
		t.Logf("%-50s median %9s  slowest %9s", r.what, median.Round(time.Microsecond), slowest.Round(time.Microsecond))
		if r.what == "queues page: Queues + Stats of each queue" && median >= 200*time.Millisecond {
			t.Errorf("a queues page takes %s at the median, want well under 200ms", median)
		}
	}
}

// timeRuns runs fn once to warm the caches, then 21 times, and returns
// the median and the slowest of those runs.
func timeRuns(t *testing.T, what string, fn func() error) (median, slowest time.Duration) {
	t.Helper()
	clk := clock.System()
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	runs := make([]time.Duration, 21)
	for i := range runs {
		start := clk.Monotonic()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		runs[i] = clk.Monotonic() - start
	}
	slices.Sort(runs)
	return runs[len(runs)/2], runs[len(runs)-1]
}
