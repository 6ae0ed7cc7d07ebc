package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// Charge is a job that charges a customer.
type Charge struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

func (Charge) Kind() string { return "charge" }

// exampleClient returns a started client of a memory store whose default
// queue runs ten jobs at once, with the handler add registers.
func exampleClient(add func(*leasehold.Client[store.NoTx])) (*leasehold.Client[store.NoTx], store.Store) {
	st, err := memory.New(memory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet(),
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {Concurrency: 10}}})
	if err != nil {
		log.Fatal(err)
	}
	add(c)
	if err := c.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	return c, st
}

// Jobs with the same key run one at a time, in the order they were
// enqueued, however many handlers the queue runs at once.
func Example_perKeyOrder() {
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(3)
	c, _ := exampleClient(func(c *leasehold.Client[store.NoTx]) {
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[Charge]) error {
			fmt.Println(job.Args.Customer, job.Args.Cents)
			wg.Done()
			return nil
		})
	})
	for _, cents := range []int{100, 200, 300} {
		if _, err := c.Enqueue(ctx, Charge{Customer: "c-1", Cents: cents}, &leasehold.EnqueueOptions{Key: "c-1"}); err != nil {
			log.Fatal(err)
		}
	}
	wg.Wait()
	if err := c.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// c-1 100
	// c-1 200
	// c-1 300
}

// A handler snoozes a job that cannot run yet (run again later, without
// using up a delivery) and fails one for good that no retry can fix.
func Example_snoozeAndPermanent() {
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(2)
	var mu sync.Mutex
	tries := map[string]int{}
	c, st := exampleClient(func(c *leasehold.Client[store.NoTx]) {
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[Charge]) error {
			mu.Lock()
			tries[job.Args.Customer]++
			n := tries[job.Args.Customer]
			mu.Unlock()
			switch {
			case job.Args.Cents <= 0:
				defer wg.Done()
				return leasehold.Permanent(errors.New("nothing to charge"))
			case n < 3:
				return leasehold.Snooze(10 * time.Millisecond) // the card processor is busy
			}
			fmt.Printf("charged %s on try %d, delivery %d of %d\n", job.Args.Customer, n, job.Attempt, job.MaxDeliveries)
			wg.Done()
			return nil
		})
	})
	for _, ch := range []Charge{{Customer: "c-1", Cents: 100}, {Customer: "c-2"}} {
		if _, err := c.Enqueue(ctx, ch, &leasehold.EnqueueOptions{MaxDeliveries: 1}); err != nil {
			log.Fatal(err)
		}
	}
	wg.Wait()
	if err := c.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	dead, err := store.ListDeadLetters(ctx, st, leasehold.DefaultQueue, 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dead:", dead[0].Reason, dead[0].LastError)
	// Output:
	// charged c-1 on try 3, delivery 1 of 1
	// dead: permanent_error permanent: nothing to charge
}

// ledger is a downstream system that refuses a write from a delivery older
// than one it has seen: a delivery whose lease was lost, say, and whose job
// already ran again elsewhere.
type ledger struct {
	mu      sync.Mutex
	fenced  map[int64]int64 // job id to the largest fencing token seen
	entries []string
}

func (l *ledger) write(jobID, token int64, entry string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if token < l.fenced[jobID] {
		return errors.New("stale fencing token")
	}
	l.fenced[jobID] = token
	l.entries = append(l.entries, entry)
	return nil
}

// The fencing token makes a side effect safe against a delivery that lost
// its lease: the downstream system keeps the largest token it has seen
// for each job and refuses older ones.
func Example_fencingToken() {
	ctx := context.Background()
	l := &ledger{fenced: map[int64]int64{}}
	done := make(chan struct{})
	c, _ := exampleClient(func(c *leasehold.Client[store.NoTx]) {
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[Charge]) error {
			defer close(done)
			return l.write(job.ID, job.FencingToken, fmt.Sprintf("%s %d", job.Args.Customer, job.Args.Cents))
		})
	})
	res, err := c.Enqueue(ctx, Charge{Customer: "c-1", Cents: 100}, nil)
	if err != nil {
		log.Fatal(err)
	}
	<-done
	if err := c.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// A delivery from before, arriving late:
	fmt.Println(l.write(res.ID, 0, "c-1 100"))
	fmt.Println(l.entries)
	// Output:
	// stale fencing token
	// [c-1 100]
}

// A job enqueued with a delay runs once the delay has passed.
func Example_delay() {
	ctx := context.Background()
	ran := make(chan time.Duration, 1)
	c, _ := exampleClient(func(c *leasehold.Client[store.NoTx]) {
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[Charge]) error {
			ran <- clock.System().Monotonic()
			return nil
		})
	})
	enqueued := clock.System().Monotonic()
	if _, err := c.Enqueue(ctx, Charge{Customer: "c-1", Cents: 100}, &leasehold.EnqueueOptions{Delay: 200 * time.Millisecond}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ran after the delay:", <-ran-enqueued >= 200*time.Millisecond)
	if err := c.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: ran after the delay: true
}

// A program's main: work until SIGTERM or SIGINT; the first lets running
// jobs finish, a second stops at once. Here the job itself sends the
// signal, as an operator would.
func ExampleClient_RunUntilSignal() {
	st, err := memory.New(memory.Config{}) // or store/sqlite, store/postgres
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet(),
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {}},
	})
	if err != nil {
		log.Fatal(err)
	}
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[Charge]) error {
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			return err
		}
		fmt.Println("charged", job.Args.Customer, "after the signal: the running job finishes")
		return nil
	})
	if _, err := c.Enqueue(context.Background(), Charge{Customer: "c-1", Cents: 100}, nil); err != nil {
		log.Fatal(err)
	}
	err = c.RunUntilSignal(context.Background())
	fmt.Println("stopped:", err)
	s, err := st.Stats(context.Background(), leasehold.DefaultQueue)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("completed:", s.Completed)
	// Output:
	// charged c-1 after the signal: the running job finishes
	// stopped: <nil>
	// completed: 1
}

// tenantKey carries the tenant in a context.
type tenantKey struct{}

// tenants carries the tenant of the request that enqueued a job to the
// job's handler, in the job's metadata, and refuses the jobs of a tenant
// that is not allowed to enqueue.
type tenants struct{}

func (tenants) Enqueue(ctx context.Context, params *leasehold.EnqueueParams, next func(context.Context) error) error {
	tenant, _ := ctx.Value(tenantKey{}).(string)
	if tenant == "suspended" {
		return errors.New("tenant suspended")
	}
	params.Options.Metadata["tenant"] = tenant
	return next(ctx)
}

func (tenants) Work(ctx context.Context, job *leasehold.JobRow, next func(context.Context) error) error {
	err := next(context.WithValue(ctx, tenantKey{}, job.Metadata["tenant"]))
	fmt.Printf("%s job for %s: %s\n", job.Kind, job.Metadata["tenant"], leasehold.OutcomeOf(ctx, job, err))
	return err
}

// Middleware wrap every enqueue and every run of a job: here, a tenant's.
func Example_middleware() {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet(), Middleware: []leasehold.Middleware{tenants{}},
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {}}})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[Charge]) error {
		defer close(done)
		fmt.Println("charging", job.Args.Customer, "of tenant", ctx.Value(tenantKey{}))
		return nil
	})
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = c.Enqueue(context.WithValue(ctx, tenantKey{}, "suspended"), Charge{Customer: "c-1", Cents: 100}, nil)
	fmt.Println(err)
	if _, err := c.Enqueue(context.WithValue(ctx, tenantKey{}, "acme"), Charge{Customer: "c-2", Cents: 200}, nil); err != nil {
		log.Fatal(err)
	}
	<-done
	c.Stop(ctx) // the job's outcome is printed before Stop returns
	// Output:
	// leasehold: enqueue a charge job: middleware 0 refused it: tenant suspended
	// charging c-2 of tenant acme
	// charge job for acme: completed
}

// A batch of jobs goes in with one store call, all or none; the results
// come back in the order of the batch, a repeated dedup id marked as a
// duplicate of the first job. A bad job anywhere refuses the whole batch.
func ExampleClient_EnqueueMany() {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet()})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.EnqueueMany(ctx, []leasehold.EnqueueParams{
		{Args: Charge{Customer: "c-1", Cents: 100}, Options: &leasehold.EnqueueOptions{Key: "c-1", DedupID: "order-1"}},
		{Args: Charge{Customer: "c-1", Cents: 200}, Options: &leasehold.EnqueueOptions{Key: "c-1"}},
		{Args: Charge{Customer: "c-1", Cents: 100}, Options: &leasehold.EnqueueOptions{Key: "c-1", DedupID: "order-1"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Println(r.ID, r.Duplicate)
	}
	_, err = c.EnqueueMany(ctx, []leasehold.EnqueueParams{
		{Args: Charge{Customer: "c-2", Cents: 100}},
		{Args: Charge{Customer: "c-2", Cents: 200}, Options: &leasehold.EnqueueOptions{Priority: 5000}},
	})
	fmt.Println(err)
	// Output:
	// 1 false
	// 2 false
	// 1 true
	// leasehold: job at index 1 of 2: enqueue a charge job: invalid argument: priority is 5000, must be -1000 to 1000
}

// A unique job is enqueued once while an equal one is waiting, running
// or completed: equal here by its args and the hour it was enqueued in.
// The second enqueue returns the first job's id, marked a duplicate; other
// args make another job.
func ExampleUniqueOpts() {
	ctx := context.Background()
	st, err := memory.New(memory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(st, leasehold.Config{Logger: quiet()})
	if err != nil {
		log.Fatal(err)
	}
	hourly := &leasehold.EnqueueOptions{Unique: &leasehold.UniqueOpts{ByArgs: true, ByPeriod: time.Hour}}
	for _, cents := range []int{100, 100, 200} {
		res, err := c.Enqueue(ctx, Charge{Customer: "c-1", Cents: cents}, hourly)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(cents, "cents: job", res.ID, "duplicate:", res.Duplicate)
	}
	// Output:
	// 100 cents: job 1 duplicate: false
	// 100 cents: job 1 duplicate: true
	// 200 cents: job 2 duplicate: false
}
