package memory_test

import (
	"testing"

	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/storetest"
)

func BenchmarkEndToEnd(b *testing.B) {
	s, err := memory.New(memory.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkEndToEnd(b, s, "bench")
}
