package leasehold

import (
	"context"
	"errors"
	"fmt"
)

// QueuePause stops every client and worker on the store's database from
// claiming the queue's jobs until QueueResume: jobs already running
// finish, and enqueues go on. The pause is kept in the database, so it
// survives restarts. The queue need not be one of this client's.
func (c *Client[TTx]) QueuePause(ctx context.Context, queue string) error {
	if err := c.st.Pause(ctx, queue); err != nil {
		return fmt.Errorf("leasehold: pause queue %q: %w", queue, err)
	}
	return nil
}

// QueueResume lets the queue's jobs be claimed again, at once by clients
// waiting for work.
func (c *Client[TTx]) QueueResume(ctx context.Context, queue string) error {
	if err := c.st.Resume(ctx, queue); err != nil {
		return fmt.Errorf("leasehold: resume queue %q: %w", queue, err)
	}
	return nil
}

// ErrAlreadyFinished reports that a job could not be cancelled because it
// had already finished: completed, dead-lettered or cancelled before.
var ErrAlreadyFinished = errors.New("job already finished")

// Cancel cancels a job by id, on any queue: a job waiting to run never
// runs; a running job's handler has its context cancelled with cause
// ErrCancelled within two heartbeats (its lease keeper's next extension
// learns of it), and the job is not retried. Either way the job ends in
// state cancelled. A job that has already finished is left as it was:
// ErrAlreadyFinished; one that does not exist is store.ErrNotFound.
func (c *Client[TTx]) Cancel(ctx context.Context, id int64) error {
	ids, err := c.st.Cancel(ctx, "", []int64{id})
	if err != nil {
		return fmt.Errorf("leasehold: cancel job %d: %w", id, err)
	}
	if len(ids) == 0 {
		return fmt.Errorf("leasehold: cancel job %d: %w", id, ErrAlreadyFinished)
	}
	return nil
}
