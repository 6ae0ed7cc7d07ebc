package leasehold_test

import (
	"context"
	"fmt"
	"log"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store/memory"
)

// SendEmail is a job: its fields are its args, stored as JSON.
type SendEmail struct {
	To string `json:"to"`
}

// Kind names the job's type; the client runs the job with the handler of
// this kind.
func (SendEmail) Kind() string { return "send_email" }

// A typed job enqueued and run by its handler.
func Example() {
	ctx := context.Background()
	st, err := memory.New(memory.Config{}) // or store/sqlite, store/postgres
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	c, err := leasehold.NewClient(st, leasehold.Config{
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {Concurrency: 10}},
		Logger: quiet(),
	})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[SendEmail]) error {
		fmt.Printf("sending to %s (attempt %d)\n", job.Args.To, job.Attempt)
		close(done)
		return nil
	})
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, SendEmail{To: "ann@example.com"}, &leasehold.EnqueueOptions{Key: "customer-1"}); err != nil {
		log.Fatal(err)
	}
	<-done
	if err := c.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: sending to ann@example.com (attempt 1)
}
