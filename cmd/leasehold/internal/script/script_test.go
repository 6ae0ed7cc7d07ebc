package script

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A holder of a script's output that outlives it cannot keep the worker
// waiting longer than the grace it is given.
func TestDrainClosesHeldPipes(t *testing.T) {
	var p pipes
	var got bytes.Buffer
	w, err := p.output(&got)
	if err != nil {
		t.Fatal(err)
	}
	held, err := syscall.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(held)
	if _, err := w.WriteString("before\n"); err != nil {
		t.Fatal(err)
	}
	p.started()
	p.drain(10 * time.Millisecond) // returns only because it closes its end
	if got.String() != "before\n" {
		t.Fatalf("copied %q", got.String())
	}
}

func TestLineWriterSplitsLongLines(t *testing.T) {
	var writes []string
	shared := writerFunc(func(p []byte) { writes = append(writes, string(p)) })
	l := &lineWriter{w: shared}
	_, _ = l.Write([]byte("one\ntw"))
	_, _ = l.Write([]byte("o\nthr"))
	if strings.Join(writes, "|") != "one\n|two\n" || l.split {
		t.Fatalf("writes %q", writes)
	}
	writes = nil
	_, _ = l.Write(bytes.Repeat([]byte("x"), maxLine+10))
	l.flush()
	if len(writes) != 2 || writes[0] != "thr"+strings.Repeat("x", maxLine-3)+"\n" || writes[1] != strings.Repeat("x", 13)+"\n" || !l.split {
		t.Fatalf("a long line came out as %d writes of %v bytes, split %v", len(writes), lens(writes), l.split)
	}
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(bytes.Clone(p))
	return len(p), nil
}

func lens(ss []string) []int {
	var n []int
	for _, s := range ss {
		n = append(n, len(s))
	}
	return n
}
