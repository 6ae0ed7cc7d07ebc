package worklease

import (
	"encoding/hex"
	"strings"
	"sync"
	"testing"
)

// TestRandomTokenNeverRepeats draws tokens from several goroutines, well
// past a refill of the entropy buffers, and checks their form and that none
// repeats.
func TestRandomTokenNeverRepeats(t *testing.T) {
	const goroutines, each = 4, 3 * randomBatch / 16
	tokens := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				tokens[g] = append(tokens[g], randomToken())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ts := range tokens {
		for _, tok := range ts {
			if len(tok) != 32 || strings.Trim(tok, "0123456789abcdef") != "" {
				t.Fatalf("token %q is not 32 lower-case hex digits", tok)
			}
			if seen[tok] {
				t.Fatalf("token %q drawn twice", tok)
			}
			seen[tok] = true
		}
	}
}

func TestHexPairsMatchEncodingHex(t *testing.T) {
	for i := range 256 {
		got := string([]byte{byte(hexPairs[i]), byte(hexPairs[i] >> 8)})
		if want := hex.EncodeToString([]byte{byte(i)}); got != want {
			t.Fatalf("hexPairs[%d] = %q, want %q", i, got, want)
		}
	}
}

func BenchmarkRandomToken(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = randomToken()
	}
}
