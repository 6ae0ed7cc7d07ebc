package script

import (
	"bytes"
	"slices"
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

// The user a script runs as reaches its supervisor as an argument and
// comes back whole, groups included; "-" is the supervisor's own.
func TestUserArgRoundTrip(t *testing.T) {
	for _, u := range []*User{{UID: 1001, GID: 1002, Groups: []uint32{1002, 27}}, {UID: 5, GID: 6}} {
		cred, err := parseCredential(u.arg())
		if err != nil {
			t.Fatal(err)
		}
		if cred.Uid != u.UID || cred.Gid != u.GID || !slices.Equal(cred.Groups, append([]uint32{}, u.Groups...)) {
			t.Fatalf("%q came back as %+v", u.arg(), cred)
		}
	}
	var none *User
	if cred, err := parseCredential(none.arg()); cred != nil || err != nil {
		t.Fatalf("no user came back as %+v, %v", cred, err)
	}
	for _, bad := range []string{"", "1:2", "x:2:3", "1:2:a"} {
		if _, err := parseCredential(bad); err == nil {
			t.Fatalf("parseCredential(%q) accepted it", bad)
		}
	}
}
