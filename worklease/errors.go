package worklease

import (
	"errors"
	"fmt"
)

// Errors that mean the caller has broken the contract. Each is returned
// wrapped, with the domain and the operation; branch on them with errors.Is.
// A call that returns one of them has changed nothing.
var (
	// ErrBacklogOrdering means TryAcquire asked for an offset other than the
	// backlog head while the domain was idle and its backlog non-empty. The
	// error is a *BacklogOrderingError, which names the expected head.
	ErrBacklogOrdering = errors.New("offset is not the backlog head")
	// ErrTokenMismatch means Succeed or Fail presented a token other than the
	// active lease's: the caller's lease has ended, or the token was never
	// issued.
	ErrTokenMismatch = errors.New("token does not match the active lease")
	// ErrLeaseNotFound means Succeed or Fail was called on a domain with no
	// active lease.
	ErrLeaseNotFound = errors.New("no active lease")
)

// BacklogOrderingError is the error TryAcquire returns for an out-of-order
// acquisition: the domain was idle, its backlog non-empty, and the offset
// asked for was not the head. errors.Is(err, ErrBacklogOrdering) holds.
type BacklogOrderingError struct {
	DomainID string
	Expected int64 // the backlog head, the only offset that may be acquired
	Got      int64 // the offset that was asked for
}

func (e *BacklogOrderingError) Error() string {
	return fmt.Sprintf("worklease: acquire of offset %d on domain %q: %s (expected %d)",
		e.Got, e.DomainID, ErrBacklogOrdering, e.Expected)
}

// Unwrap returns ErrBacklogOrdering.
func (e *BacklogOrderingError) Unwrap() error { return ErrBacklogOrdering }
