package worker

import (
	"errors"
	"fmt"
	"time"
)

// Causes of a handler's context being cancelled; read them with
// context.Cause. Besides these, store.ErrLeaseLost: the message's lease was
// lost (the store refused to extend it, or it expired before an extension
// got through); the message is not completed by this worker and is
// delivered again.
var (
	// ErrMaxProcessingTime: the handler ran longer than MaxProcessingTime.
	// The message is failed and retried or dead-lettered as usual.
	ErrMaxProcessingTime = errors.New("maximum processing time exceeded")
	// ErrShutdown: the worker is stopping and could not wait any longer.
	// The message's lease is released so that another worker can take it.
	ErrShutdown = errors.New("worker shutting down")
	// ErrCancelled: the message was cancelled (store.Store.Cancel) while
	// its handler ran. It is not completed, failed or retried: it stays
	// cancelled. The lease keeper learns of it at its next extension.
	ErrCancelled = errors.New("message cancelled")
)

// ErrAbandoned reports that handlers did not return after their contexts
// were cancelled at a hard stop; their leases were released and they were
// left running.
var ErrAbandoned = errors.New("handlers did not return after cancellation")

// PermanentError marks a handler error that retrying cannot fix: the message
// is dead-lettered at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent. A nil err stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// NotStartedError marks a handler error that says the work never began: the
// program the handler runs could not be started, say. Such a failure is not
// the message's fault, so the message is given back without counting its
// delivery and becomes visible again after the first retry delay. A
// handler that returns it for every message keeps them all from
// progressing without ever dead-lettering them: whoever runs it must notice
// and stop (the command's script worker exits after a few in a row).
type NotStartedError struct{ Err error }

func (e *NotStartedError) Error() string { return "not started: " + e.Err.Error() }
func (e *NotStartedError) Unwrap() error { return e.Err }

// NotStarted marks err as a failure to begin the work. A nil err stays nil.
func NotStarted(err error) error {
	if err == nil {
		return nil
	}
	return &NotStartedError{Err: err}
}

// IsNotStarted reports whether err, or an error it wraps, was marked by
// NotStarted.
func IsNotStarted(err error) bool {
	var n *NotStartedError
	return errors.As(err, &n)
}

// SnoozeError asks for the message to run again after Delay: it is given
// back without counting its delivery, so snoozing never uses up the
// message's deliveries.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// Snooze returns the error a handler returns to run its message again after
// d (at least 0) without counting the delivery.
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// PanicError is the failure a recovered handler panic becomes.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }
