package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

// One holder at a time has the maintainer lease: it renews it under the
// same token, another takes it only once it lapses or is released, and
// each new holding has a larger token.
func testMaintainer(t *testing.T, f Factory) {
	b := setup(t, f)
	hold := func(holder string, d time.Duration) store.Maintainer {
		t.Helper()
		m, err := b.s.HoldMaintainer(b.ctx, holder, d)
		if err != nil {
			t.Fatalf("HoldMaintainer(%s): %v", holder, err)
		}
		return m
	}
	a := hold("a", 10*time.Second)
	if a.Holder != "a" || a.Token <= 0 || !a.Expires.Equal(b.clk.Now().Add(10*time.Second)) {
		t.Fatalf("the first holder got %+v", a)
	}
	if m := hold("b", 10*time.Second); m.Holder != "a" || m.Token != a.Token {
		t.Fatalf("b took a held lease: %+v", m)
	}
	b.clk.Advance(5 * time.Second)
	renewed := hold("a", 10*time.Second)
	if renewed.Holder != "a" || renewed.Token != a.Token || !renewed.Expires.Equal(b.clk.Now().Add(10*time.Second)) {
		t.Fatalf("a's renewal: %+v, want the same token until %s", renewed, b.clk.Now().Add(10*time.Second))
	}
	b.clk.Advance(10 * time.Second) // lapsed
	taken := hold("b", 10*time.Second)
	if taken.Holder != "b" || taken.Token <= a.Token {
		t.Fatalf("b after a's lease lapsed: %+v", taken)
	}
	if m := hold("a", 10*time.Second); m.Holder != "b" {
		t.Fatalf("a took b's lease: %+v", m)
	}
	// A release under a stale token does nothing; under the holder's own
	// token the lease is free at once.
	if err := b.s.ReleaseMaintainer(b.ctx, "b", a.Token); err != nil {
		t.Fatal(err)
	}
	if m := hold("a", 10*time.Second); m.Holder != "b" {
		t.Fatalf("a release under a stale token freed the lease: %+v", m)
	}
	if err := b.s.ReleaseMaintainer(b.ctx, "b", taken.Token); err != nil {
		t.Fatal(err)
	}
	if m := hold("a", 10*time.Second); m.Holder != "a" || m.Token <= taken.Token {
		t.Fatalf("a after b released: %+v", m)
	}
	if _, err := b.s.HoldMaintainer(b.ctx, "", time.Second); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an empty holder: %v, want ErrInvalid", err)
	}
	if _, err := b.s.HoldMaintainer(b.ctx, "a", 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a zero lease: %v, want ErrInvalid", err)
	}
}
