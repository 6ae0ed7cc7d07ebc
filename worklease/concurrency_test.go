package worklease_test

import (
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/worklease"
)

// TestConcurrentProducersAndOrchestrator races, in each of many domains,
// several producers that all submit offsets 1..N in order (so every offset
// arrives several times) against one orchestrator that finishes whatever is
// acquired and hands off through the hints. Every offset must be processed
// exactly once, in increasing order, in every domain.
//
// A producer whose TryAcquire returns Acquired holds the lease and passes
// it to the orchestrator. One that finds the domain idle with a backlog
// (ErrBacklogOrdering) helps by acquiring the head, which the orchestrator
// is about to do, and tries again: no spinning, no sleeping.
func TestConcurrentProducersAndOrchestrator(t *testing.T) {
	const (
		domains   = 64
		producers = 4
		n         = 150
	)
	l, err := worklease.New(worklease.Config{})
	if err != nil {
		t.Fatal(err)
	}
	type acquired struct {
		offset int64
		token  string
	}
	results := make([][]int64, domains)
	var wg sync.WaitGroup
	for i := range domains {
		domain := "domain-" + strconv.Itoa(i)
		owned := make(chan acquired, 1) // at most one lease, so at most one in flight

		for range producers {
			wg.Go(func() {
				for offset := int64(1); offset <= n; offset++ {
					for {
						r, err := l.TryAcquire(domain, offset)
						var oe *worklease.BacklogOrderingError
						if errors.As(err, &oe) {
							if h, err := l.TryAcquire(domain, oe.Expected); err != nil {
								t.Errorf("TryAcquire(%q, head %d): %v", domain, oe.Expected, err)
								return
							} else if h.Code == worklease.Acquired {
								owned <- acquired{oe.Expected, h.Token}
							}
							continue
						}
						if err != nil {
							t.Errorf("TryAcquire(%q, %d): %v", domain, offset, err)
							return
						}
						if r.Code == worklease.Acquired {
							owned <- acquired{offset, r.Token}
						}
						break
					}
				}
			})
		}

		wg.Go(func() {
			var done []int64
			for len(done) < n {
				a := <-owned
				for {
					s, err := l.Succeed(domain, a.token)
					if err != nil {
						t.Errorf("Succeed(%q) for offset %d: %v", domain, a.offset, err)
						return
					}
					done = append(done, a.offset)
					if s.Code == worklease.NoBacklog {
						break
					}
					r, err := l.TryAcquire(domain, s.Next)
					if err != nil {
						t.Errorf("TryAcquire(%q, hint %d): %v", domain, s.Next, err)
						return
					}
					if r.Code != worklease.Acquired {
						// A producer got there first, and sends it on owned.
						if r.Code != worklease.AlreadyAcquired {
							t.Errorf("TryAcquire(%q, hint %d) = %v", domain, s.Next, r.Code)
						}
						break
					}
					a = acquired{s.Next, r.Token}
				}
			}
			results[i] = done
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	want := make([]int64, n)
	for k := range want {
		want[k] = int64(k + 1)
	}
	for i := range domains {
		domain := "domain-" + strconv.Itoa(i)
		if !reflect.DeepEqual(results[i], want) {
			t.Errorf("%s processed %v, want 1..%d once each, in order", domain, results[i], n)
		}
		if lease, ok := l.Lease(domain); ok || len(l.Backlog(domain)) != 0 {
			t.Errorf("%s ends with lease %+v and backlog %v", domain, lease, l.Backlog(domain))
		}
		processed, failed, _ := worklease.TerminalRanges(l, domain)
		if !reflect.DeepEqual(processed, [][2]int64{{1, n}}) || failed != nil {
			t.Errorf("%s: processed %v, failed %v", domain, processed, failed)
		}
	}
}

// TestConcurrentDomainCreation has many goroutines race to create the same
// domains; exactly one of each offset's acquisitions may win.
func TestConcurrentDomainCreation(t *testing.T) {
	l, err := worklease.New(worklease.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const domains, racers = 32, 8
	wins := make([][racers]bool, domains)
	var wg sync.WaitGroup
	for r := range racers {
		wg.Go(func() {
			for i := range domains {
				res, err := l.TryAcquire("fresh-"+strconv.Itoa(i), 1)
				if err != nil {
					t.Error(err)
					return
				}
				wins[i][r] = res.Code == worklease.Acquired
			}
		})
	}
	wg.Wait()
	for i := range domains {
		count := 0
		for _, w := range wins[i] {
			if w {
				count++
			}
		}
		if count != 1 {
			t.Errorf("domain %d acquired %d times", i, count)
		}
	}
}
