package memory_test

import (
	"testing"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store {
		s, err := memory.New(memory.Config{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
