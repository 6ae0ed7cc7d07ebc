package worklease

import "time"

// Lease is a domain's active lease: the one offset in flight.
type Lease struct {
	// Offset is the offset in flight.
	Offset int64
	// Token is the fencing token that Succeed and Fail must present.
	Token string
	// AcquiredAt is the wall time, on Config.Clock, at which the offset was
	// acquired. Retries leave it unchanged, so an orchestrator can compute
	// backoff and deadlines from it and RetryCount.
	AcquiredAt time.Time
	// RetryCount is the number of Fail calls on this offset so far.
	RetryCount int
}
