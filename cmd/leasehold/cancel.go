package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func (a *app) cancelCommand() *cobra.Command {
	var queue string
	cmd := &cobra.Command{
		Use:   "cancel --queue Q ID...",
		Short: "Cancel messages so that they never run (again)",
		Long: `cancel cancels messages of a queue by id. A pending or waiting message is
cancelled at once and never runs. A message in flight is cancelled in the
database at once: its worker learns of it at its next heartbeat and stops
the handler (a script gets SIGTERM, then SIGKILL after the grace period),
and the message is not retried. A message that has already finished
(completed, dead, cancelled) is left as it is. An id that names no message
of the queue is an error, and then nothing is cancelled. Cancelled messages
show in stats and in list --state cancelled.`,
		Example: `  leasehold cancel --queue emails 17
  leasehold cancel --queue emails 17 18 19`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireQueue(queue); err != nil {
				return err
			}
			if len(args) == 0 {
				return usagef("name the messages to cancel by id")
			}
			ids := make([]int64, len(args))
			seen := make(map[int64]bool, len(args))
			for i, arg := range args {
				id, err := strconv.ParseInt(arg, 10, 64)
				if err != nil || id < 1 {
					return usagef("%q is not a message id (a positive integer)", arg)
				}
				if seen[id] {
					return usagef("message %d is named twice", id)
				}
				seen[id], ids[i] = true, id
			}
			ctx := cmd.Context()
			st, err := a.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			done, err := st.Cancel(ctx, queue, ids)
			if err != nil {
				return err
			}
			if len(done) == len(ids) {
				_, err = fmt.Fprintf(a.stdout, "cancelled %d\n", len(done))
			} else {
				_, err = fmt.Fprintf(a.stdout, "cancelled %d of %d (the others had already finished)\n", len(done), len(ids))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "queue name (required)")
	return cmd
}
