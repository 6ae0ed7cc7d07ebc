package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) queueCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue pause|resume --queue Q",
		Short: "Pause or resume a queue",
		Long: `queue pause stops every worker, on every machine, from claiming the
queue's messages; handlers already running finish, and enqueues go on. The
pause is kept in the database, so it survives restarts, until queue
resume, which wakes the queue's waiting workers. A queue may be paused
before it holds any message.`,
		Example: `  leasehold queue pause --queue emails
  leasehold queue resume --queue emails`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("missing subcommand: queue pause or queue resume")
		},
	}
	var queue string
	for _, pause := range []bool{true, false} {
		use, short, done := "resume", "Let workers claim the queue's messages again", "resumed"
		if pause {
			use, short, done = "pause", "Stop workers claiming the queue's messages", "paused"
		}
		sub := &cobra.Command{Use: use + " --queue Q", Short: short, Args: noArgs,
			Example: "  leasehold queue " + use + " --queue emails",
			RunE: func(c *cobra.Command, _ []string) error {
				if err := requireQueue(queue); err != nil {
					return err
				}
				ctx := c.Context()
				st, err := a.openExisting(ctx)
				if err != nil {
					return err
				}
				defer st.Close()
				act := st.Resume
				if pause {
					act = st.Pause
				}
				if err := act(ctx, queue); err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "queue %s %s\n", escape(queue), done)
				return err
			}}
		sub.Flags().StringVar(&queue, "queue", "", "queue name (required)")
		cmd.AddCommand(sub)
	}
	return cmd
}
