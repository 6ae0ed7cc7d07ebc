package worklease

import "strconv"

// AcquireCode is the outcome of TryAcquire.
type AcquireCode int

const (
	// Acquired: the caller now holds the lease on the offset; the result
	// carries the new token.
	Acquired AcquireCode = iota + 1
	// AlreadyAcquired: the offset is the one in flight; the result carries
	// the active lease's token.
	AlreadyAcquired
	// Enqueued: another offset is in flight, and this one is now in the
	// backlog (or already was).
	Enqueued
	// AlreadyProcessed: the offset has succeeded before; nothing was done.
	AlreadyProcessed
	// AlreadyFailed: the offset was given up on before; nothing was done.
	AlreadyFailed
)

func (c AcquireCode) String() string {
	switch c {
	case Acquired:
		return "Acquired"
	case AlreadyAcquired:
		return "AlreadyAcquired"
	case Enqueued:
		return "Enqueued"
	case AlreadyProcessed:
		return "AlreadyProcessed"
	case AlreadyFailed:
		return "AlreadyFailed"
	}
	return "AcquireCode(" + strconv.Itoa(int(c)) + ")"
}

// SucceedCode is the outcome of Succeed.
type SucceedCode int

const (
	// NoBacklog: the lease is cleared and the backlog is empty.
	NoBacklog SucceedCode = iota + 1
	// NextHint: the lease is cleared and the result's Next is the backlog
	// head, still in the backlog, for the orchestrator to acquire.
	NextHint
)

func (c SucceedCode) String() string {
	switch c {
	case NoBacklog:
		return "NoBacklog"
	case NextHint:
		return "NextHint"
	}
	return "SucceedCode(" + strconv.Itoa(int(c)) + ")"
}

// FailCode is the outcome of Fail.
type FailCode int

const (
	// RetryScheduled: the lease is kept on the same offset with its retry
	// count increased; the orchestrator decides when to run it again.
	RetryScheduled FailCode = iota + 1
	// GiveUpNoBacklog: the retries are used up, the offset is failed for
	// good, the lease is cleared and the backlog is empty.
	GiveUpNoBacklog
	// GiveUpNextHint: as GiveUpNoBacklog, but the backlog is not empty and
	// the result's Next is its head.
	GiveUpNextHint
)

func (c FailCode) String() string {
	switch c {
	case RetryScheduled:
		return "RetryScheduled"
	case GiveUpNoBacklog:
		return "GiveUpNoBacklog"
	case GiveUpNextHint:
		return "GiveUpNextHint"
	}
	return "FailCode(" + strconv.Itoa(int(c)) + ")"
}

// AcquireResult is what TryAcquire returns.
type AcquireResult struct {
	Code AcquireCode
	// Token is the lease's fencing token, set for Acquired and
	// AlreadyAcquired.
	Token string
}

// SucceedResult is what Succeed returns.
type SucceedResult struct {
	Code SucceedCode
	// Next is the backlog head, set for NextHint.
	Next int64
}

// FailResult is what Fail returns.
type FailResult struct {
	Code FailCode
	// RetryCount is the lease's retry count after this failure, set for
	// RetryScheduled.
	RetryCount int
	// Next is the backlog head, set for GiveUpNextHint.
	Next int64
}
