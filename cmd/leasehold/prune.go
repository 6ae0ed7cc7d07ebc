package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/maintenance"
)

// retention is a flag that takes a duration, or "forever" to keep.
type retention struct{ d time.Duration }

func (r *retention) String() string {
	if r.d == maintenance.KeepForever {
		return "forever"
	}
	return r.d.String()
}

func (r *retention) Set(s string) error {
	if s == "forever" {
		r.d = maintenance.KeepForever
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q: want a positive duration (24h, 90m) or forever", s)
	}
	r.d = d
	return nil
}

func (r *retention) Type() string { return "duration|forever" }

func (a *app) pruneCommand() *cobra.Command {
	var queue string
	completed := retention{maintenance.DefaultCompletedRetention}
	dead := retention{maintenance.DefaultDeadRetention}
	cmd := &cobra.Command{
		Use:   "prune --queue Q [--completed-older-than DUR] [--dead-older-than DUR]",
		Short: "Delete a queue's finished messages now",
		Long: `prune deletes the queue's completed messages that finished more than
--completed-older-than ago, and its dead and cancelled ones that ended more
than --dead-older-than ago ("forever" keeps a kind), in batches, and prints
how many went. work does the same in the background for every queue (see its
--retain-completed and --retain-dead). A message is never deleted within
the dedup window of its enqueue (5 minutes), so that its dedup id counts for
the whole window; once it is deleted, its dedup id may be used again.`,
		Example: `  leasehold prune --queue emails
  leasehold prune --queue emails --completed-older-than 1h --dead-older-than forever`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireQueue(queue); err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := a.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			cleaner, err := maintenance.NewCleaner(maintenance.CleanerConfig{Deps: a.deps(st, nil), Queue: queue,
				Retention: maintenance.Retention{Completed: completed.d, Dead: dead.d}})
			if err != nil {
				return err
			}
			n, err := cleaner.RunOnce(ctx)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "pruned %d completed, %d dead, %d cancelled\n", n.Completed, n.Dead, n.Cancelled)
			return err
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "queue name (required)")
	cmd.Flags().Var(&completed, "completed-older-than", "delete completed messages that finished longer ago than this (or forever: keep them)")
	cmd.Flags().Var(&dead, "dead-older-than", "delete dead and cancelled messages that ended longer ago than this (or forever: keep them)")
	return cmd
}
