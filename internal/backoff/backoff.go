// Package backoff computes retry delays: exponential growth, a cap, and
// jitter from an injectable random source, and sleeps them on an injectable
// clock.
package backoff

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// Exponential is a capped exponential backoff with jitter. The zero value
// uses every default.
type Exponential struct {
	// Initial is the delay before the first retry. Default 1s.
	Initial time.Duration
	// Max caps every delay, jitter included. Default 10m.
	Max time.Duration
	// Multiplier is the growth factor between attempts; at least 1. Default 2.
	Multiplier float64
	// Jitter is the fraction of each delay that is random: a delay d becomes
	// a value in [d*(1-Jitter), d]. From 0 (no jitter) to 1; default 0.2.
	// Use NoJitter for exact delays, since 0 means the default.
	Jitter float64
	// Rand returns a number in [0, 1). Default math/rand/v2's Float64.
	Rand func() float64
}

// NoJitter is a Jitter value that turns jitter off.
const NoJitter = -1.0

// Defaults returns b with every zero field set to its default.
func (b Exponential) Defaults() Exponential {
	if b.Initial == 0 {
		b.Initial = time.Second
	}
	if b.Max == 0 {
		b.Max = 10 * time.Minute
	}
	if b.Multiplier == 0 {
		b.Multiplier = 2
	}
	if b.Jitter == 0 {
		b.Jitter = 0.2
	}
	if b.Rand == nil {
		b.Rand = rand.Float64
	}
	return b
}

// Validate reports the first field whose value is out of range, after
// defaults.
func (b Exponential) Validate() error {
	b = b.Defaults()
	switch {
	case b.Initial < 0:
		return fmt.Errorf("backoff: Initial is %s, must not be negative", b.Initial)
	case b.Max < b.Initial:
		return fmt.Errorf("backoff: Max (%s) is below Initial (%s)", b.Max, b.Initial)
	case b.Multiplier < 1 || math.IsNaN(b.Multiplier) || math.IsInf(b.Multiplier, 0):
		return fmt.Errorf("backoff: Multiplier is %v, must be a finite number >= 1", b.Multiplier)
	case b.Jitter != NoJitter && (b.Jitter < 0 || b.Jitter > 1 || math.IsNaN(b.Jitter)):
		return fmt.Errorf("backoff: Jitter is %v, must be between 0 and 1 (or NoJitter)", b.Jitter)
	}
	return nil
}

// Delay returns the delay before retry number attempt, counting from 1.
// An attempt below 1 counts as 1.
func (b Exponential) Delay(attempt int) time.Duration {
	b = b.Defaults()
	if attempt < 1 {
		attempt = 1
	}
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(attempt-1))
	if d > float64(b.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(b.Max)
	}
	if b.Jitter != NoJitter {
		d -= d * b.Jitter * b.Rand()
	}
	return time.Duration(d)
}

// Sleep waits Delay(attempt) on s, or until ctx ends.
func (b Exponential) Sleep(ctx context.Context, s clock.Sleeper, attempt int) error {
	return s.Sleep(ctx, b.Delay(attempt))
}
