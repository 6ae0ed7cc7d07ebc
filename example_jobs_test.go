package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store/memory"
)

// An admin tool lists jobs, runs a scheduled one now, and deletes one:
// the client need not be started for that.
func ExampleClient_JobList() {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet()})
	if err != nil {
		log.Fatal(err)
	}
	for _, cents := range []int{100, 200} {
		if _, err := c.Enqueue(ctx, Charge{Customer: "c-1", Cents: cents}, &leasehold.EnqueueOptions{Delay: time.Hour}); err != nil {
			log.Fatal(err)
		}
	}
	page, err := c.JobList(ctx, &leasehold.JobListParams{Kind: "charge", States: []leasehold.JobState{leasehold.JobStatePending}})
	if err != nil {
		log.Fatal(err)
	}
	rows := page.Jobs
	for _, row := range rows {
		fmt.Println(row.ID, row.Queue, row.State, string(row.Args), "due later:", row.ScheduledAt.After(row.EnqueuedAt))
	}

	row, err := c.JobRetry(ctx, rows[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried", row.ID, "due now:", row.ScheduledAt.Before(rows[0].ScheduledAt))

	if _, err := c.JobDelete(ctx, rows[1].ID); err != nil {
		log.Fatal(err)
	}
	_, err = c.JobGet(ctx, rows[1].ID)
	fmt.Println("deleted", rows[1].ID, errors.Is(err, leasehold.ErrJobNotFound))
	// Output:
	// 1 default pending {"customer":"c-1","cents":100} due later: true
	// 2 default pending {"customer":"c-1","cents":200} due later: true
	// retried 1 due now: true
	// deleted 2 true
}
