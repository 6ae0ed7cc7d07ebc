package leasehold

import (
	"context"
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
