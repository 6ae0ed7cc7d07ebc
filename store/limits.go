package store

import (
	"fmt"

	"time"
)

// Limits and defaults shared by every backend.
const (
	// MaxNameLength bounds queue names, keys and dedup ids, in bytes.
	MaxNameLength = 255
	// MaxBatch bounds the messages of one claim, listing or batch call.
	MaxBatch = 10_000
	// MinLease is the shortest lease.
	MinLease = time.Millisecond
	// MaxErrorLength bounds a recorded error text, in bytes.
	MaxErrorLength = 4096
	// MaxErrors bounds a message's error history (Info.Errors): the
	// newest are kept.
	MaxErrors = 20
	// MaxDeliveriesLimit bounds a message's delivery budget.
	MaxDeliveriesLimit = 1<<31 - 1
	// DefaultMaxDeliveries is a message's delivery budget when none is given.
	DefaultMaxDeliveries = 5
	// DefaultPayloadLimit is the largest payload a store accepts by default.
	DefaultPayloadLimit = 1 << 20
	// MinPriority and MaxPriority bound a message's priority.
	MinPriority, MaxPriority = -1000, 1000
	// DefaultDedupWindow is how long a dedup id is remembered by default,
	// counted from the first message's enqueue.
	DefaultDedupWindow = 5 * time.Minute
	// MaxQueueAttributesSize bounds a queue record's attributes (see
	// Store.CreateQueue): the bytes of their keys and values added up, both
	// those one call gives and those a record holds after a merge.
	MaxQueueAttributesSize = 64 << 10
)

// Options are the settings every backend shares. The zero value uses every
// default.
type Options struct {
	// PayloadLimit is the largest payload accepted, in bytes. Default
	// DefaultPayloadLimit.
	PayloadLimit int
	// DedupWindow is how long a dedup id is remembered. Default
	// DefaultDedupWindow.
	DedupWindow time.Duration
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.PayloadLimit == 0 {
		o.PayloadLimit = DefaultPayloadLimit
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	return o
}

// Validate reports a field out of range.
func (o Options) Validate() error {
	if o.PayloadLimit < 0 {
		return fmt.Errorf("%w: PayloadLimit is %d, must not be negative", ErrInvalid, o.PayloadLimit)
	}
	if o.DedupWindow < 0 {
		return fmt.Errorf("%w: DedupWindow is %s, must not be negative", ErrInvalid, o.DedupWindow)
	}
	return nil
}
