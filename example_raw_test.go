package leasehold_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store/memory"
)

// A raw handler takes jobs of every kind without a handler of their own as
// they are stored, for a program that hands them on, say to a worker
// written in another language: here each job becomes a line of JSON, what
// such a worker would read on its standard input, with the facts it needs
// to do the job and to fence its writes.
func ExampleClient_HandleAny() {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	c, err := leasehold.NewClient(st, leasehold.Config{
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {Concurrency: 1}},
		Logger: quiet(),
	})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	c.HandleAny(func(ctx context.Context, job *leasehold.RawJob) error {
		line, err := json.Marshal(struct {
			Kind         string          `json:"kind"`
			Args         json.RawMessage `json:"args"`
			Attempt      int             `json:"attempt"`
			FencingToken int64           `json:"fencing_token"`
		}{job.Kind, job.Payload, job.Attempt, job.FencingToken})
		if err != nil {
			// The same bytes will not encode next time either.
			return leasehold.Permanent(err)
		}
		fmt.Println(string(line))
		close(done)
		return nil
	})
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, SendEmail{To: "ann@example.com"}, nil); err != nil {
		log.Fatal(err)
	}
	<-done
	if err := c.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: {"kind":"send_email","args":{"to":"ann@example.com"},"attempt":1,"fencing_token":1}
}
