package maintenance_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/store"
)

// cutOff is a store whose maintainer calls fail while off is set: a
// process that cannot reach the database.
type cutOff struct {
	store.Store
	off atomic.Bool
}

func (c *cutOff) HoldMaintainer(ctx context.Context, holder string, d time.Duration) (store.Maintainer, error) {
	if c.off.Load() {
		return store.Maintainer{}, errors.New("database unreachable")
	}
	return c.Store.HoldMaintainer(ctx, holder, d)
}

// One process of several maintains the database. One that cannot renew
// the lease stops maintaining when its holding ends, before another can
// take the lease; one that stops gives the lease up, and another takes it
// within a renewal interval.
func TestOneMaintainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		shared := newStore(t, nil)
		run := func(id string, st store.Store) (*maintenance.Maintenance, func()) {
			w, err := maintenance.New(maintenance.Config{Deps: deps(st, nil), ID: id, LeaseDuration: lease})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Run(context.Background()) }()
			var once sync.Once
			return w, func() {
				once.Do(func() {
					if err := w.Shutdown(context.Background()); err != nil {
						t.Errorf("shutdown %s: %v", id, err)
					}
					<-done
				})
			}
		}
		aStore := &cutOff{Store: shared}
		a, stopA := run("a", aStore)
		synctest.Wait()
		if !a.Maintaining() {
			t.Fatal("a lone worker does not maintain the database")
		}
		b, stopB := run("b", shared)
		defer stopB()
		time.Sleep(10 * lease)
		synctest.Wait()
		if !a.Maintaining() || b.Maintaining() {
			t.Fatalf("maintaining: a %v, b %v; want a only", a.Maintaining(), b.Maintaining())
		}

		// a loses the database: it stops within its own reckoning of the
		// lease, which ends no later than the database's; b takes over once
		// the database's lease lapses, at its next try.
		aStore.off.Store(true)
		cut := time.Now()
		for a.Maintaining() {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if a.Maintaining() && b.Maintaining() {
				t.Fatal("b took the lease while a still thought it held it")
			}
			if time.Since(cut) > 10*lease {
				t.Fatal("a maintains on without the database")
			}
		}
		if stopped := time.Since(cut); stopped > lease {
			t.Fatalf("a stopped maintaining %s after it lost the database, more than the lease %s", stopped, lease)
		}
		for !b.Maintaining() && time.Since(cut) < 10*lease {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		if took := time.Since(cut); took > lease+lease/3 {
			t.Fatalf("b took over %s after a lost the database, more than a lease and a renewal interval", took)
		}

		// a back: b keeps the lease. Then b stops, and a takes over at its
		// next try, not when b's lease would have lapsed.
		aStore.off.Store(false)
		time.Sleep(lease)
		synctest.Wait()
		if a.Maintaining() || !b.Maintaining() {
			t.Fatalf("after a came back: a %v, b %v; want b only", a.Maintaining(), b.Maintaining())
		}
		stopB()
		stopped := time.Now()
		for !a.Maintaining() && time.Since(stopped) < 10*lease {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		if took := time.Since(stopped); took > lease/3 {
			t.Fatalf("a took over %s after b stopped, more than a renewal interval", took)
		}
		stopA()
	})
}
