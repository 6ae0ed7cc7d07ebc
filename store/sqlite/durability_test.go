package sqlite_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
)

// A power failure may undo the commits made since the last one that
// synced, and no more (see durability.go): claims, which commit without
// syncing. It is played here by copying the database file with its WAL
// cut where it ended after that commit (the first claim after the open,
// which raises the fence ceiling), as a power failure would leave them.
// In the copy the later claims are undone, their messages claimable
// again, and the tokens its claims hand out are above every token handed
// out before: none is handed out twice.
func TestPowerFailureHandsOutNoTokenTwice(t *testing.T) {
	for _, sync := range []string{"full", "normal"} {
		t.Run(sync, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "lh.db")
			s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			msgs := make([]store.NewMessage, 30)
			for i := range msgs {
				msgs[i] = store.NewMessage{Queue: "q", Payload: []byte("p")}
			}
			if _, err := s.Enqueue(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			claim := func(s store.Store, n int) []store.Delivery {
				t.Helper()
				ds, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: n, LeaseDuration: time.Hour})
				if err != nil || len(ds) != n {
					t.Fatalf("claim of %d: %d, %v", n, len(ds), err)
				}
				return ds
			}
			handed := claim(s, 5) // raises the ceiling: a commit that syncs
			synced := walSize(t, path)
			var undone []int64
			for range 3 {
				for _, d := range claim(s, 5) {
					handed = append(handed, d)
					undone = append(undone, d.MessageID)
				}
			}
			if walSize(t, path) <= synced {
				t.Fatal("the claims after the synced commit wrote nothing to the WAL")
			}

			dir := t.TempDir()
			copyFile(t, path, filepath.Join(dir, "lh.db"), -1)
			copyFile(t, path+"-wal", filepath.Join(dir, "lh.db-wal"), synced)
			after, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "lh.db"), Synchronous: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer after.Close()
			st, err := after.Stats(ctx, "q")
			if err != nil {
				t.Fatal(err)
			}
			if st.Processing != 5 || st.Pending != 25 {
				t.Fatalf("after the failure: %d processing, %d pending; want the first claim's 5 kept and the rest undone", st.Processing, st.Pending)
			}
			again := claim(after, 25)
			highest := slices.MaxFunc(handed, func(a, b store.Delivery) int { return int(a.FencingToken - b.FencingToken) }).FencingToken
			for _, d := range again {
				if d.FencingToken <= highest {
					t.Fatalf("message %d claimed with token %d after the failure; tokens up to %d were handed out before it", d.MessageID, d.FencingToken, highest)
				}
				if slices.Contains(undone, d.MessageID) && d.Attempt != 1 {
					t.Fatalf("message %d: attempt %d after its claim was undone, want 1", d.MessageID, d.Attempt)
				}
			}
		})
	}
}

// The first claim after an open raises the ceiling past its tokens; the
// store's next open moves the fence up to it.
func TestOpenMovesFenceToCeiling(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lh.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: "q"}, {Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	first, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Hour})
	if err != nil || len(first) != 1 {
		t.Fatalf("claim: %v, %v", first, err)
	}
	fence, ceiling := fenceOf(t, s)
	if fence != first[0].FencingToken || ceiling <= fence {
		t.Fatalf("after a claim of token %d: fence %d, ceiling %d; want the fence at the token and the ceiling above it", first[0].FencingToken, fence, ceiling)
	}
	other, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	if f, _ := fenceOf(t, s); f != ceiling {
		t.Fatalf("after another open the fence is %d, want the ceiling %d", f, ceiling)
	}
	next, err := s.Claim(ctx, store.Claim{Queue: "q", WorkerID: "w", Max: 1, LeaseDuration: time.Hour})
	if err != nil || len(next) != 1 || next[0].FencingToken != ceiling+1 {
		t.Fatalf("claim after the open: %v, %v; want token %d", next, err, ceiling+1)
	}
	if _, c := fenceOf(t, s); c <= next[0].FencingToken {
		t.Fatalf("ceiling %d after a claim over it of token %d, want it raised past", c, next[0].FencingToken)
	}
}

func fenceOf(t *testing.T, s *sqlite.Store) (fence, ceiling int64) {
	t.Helper()
	err := s.DB().QueryRow("SELECT (SELECT value FROM leasehold_meta WHERE name = 'fence'), (SELECT value FROM leasehold_meta WHERE name = 'fence_ceiling')").
		Scan(&fence, &ceiling)
	if err != nil {
		t.Fatal(err)
	}
	return fence, ceiling
}

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// copyFile copies the first n bytes of from to to (all of it when n < 0).
func copyFile(t *testing.T, from, to string, n int64) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = src
	if n >= 0 {
		r = io.LimitReader(src, n)
	}
	if _, err := io.Copy(dst, r); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
