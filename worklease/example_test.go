package worklease_test

import (
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/worklease"
)

// An orchestrator drains a domain: messages arrive while one is in flight,
// join the backlog, and each Succeed or final Fail hints at the next one,
// which the orchestrator acquires in turn. Offset 3 fails once and is
// retried on the same lease.
func Example() {
	leases, err := worklease.New(worklease.Config{MaxRetries: 1})
	if err != nil {
		panic(err)
	}
	attempts := map[int64]int{}
	process := func(offset int64) error {
		attempts[offset]++
		if offset == 3 && attempts[offset] == 1 {
			return errors.New("flaky")
		}
		return nil
	}

	first, _ := leases.TryAcquire("orders", 1)
	for _, offset := range []int64{2, 3, 2, 4} { // 2 is delivered twice
		r, _ := leases.TryAcquire("orders", offset)
		fmt.Println("deliver", offset, "->", r.Code)
	}
	fmt.Println("backlog:", leases.Backlog("orders"))

	offset, token := int64(1), first.Token
	for {
		if err := process(offset); err != nil {
			f, _ := leases.Fail("orders", token)
			fmt.Println("offset", offset, "failed:", f.Code, f.RetryCount)
			continue // a real orchestrator would back off first
		}
		s, _ := leases.Succeed("orders", token)
		fmt.Println("offset", offset, "done:", s.Code, s.Next)
		if s.Code == worklease.NoBacklog {
			break
		}
		r, err := leases.TryAcquire("orders", s.Next)
		if err != nil || r.Code != worklease.Acquired {
			panic(fmt.Sprint(r.Code, err))
		}
		offset, token = s.Next, r.Token
	}

	again, _ := leases.TryAcquire("orders", 2)
	fmt.Println("redeliver 2 ->", again.Code)
	// Output:
	// deliver 2 -> Enqueued
	// deliver 3 -> Enqueued
	// deliver 2 -> Enqueued
	// deliver 4 -> Enqueued
	// backlog: [2 3 4]
	// offset 1 done: NextHint 2
	// offset 2 done: NextHint 3
	// offset 3 failed: RetryScheduled 1
	// offset 3 done: NextHint 4
	// offset 4 done: NoBacklog 0
	// redeliver 2 -> AlreadyProcessed
}
