package serve

import (
	"net"
	"net/http"
	"testing"
)

// closeCounter is a connection that records whether it was closed.
type closeCounter struct {
	net.Conn
	closed bool
}

func (c *closeCounter) Close() error { c.closed = true; return nil }

// At the cap, a new connection evicts the oldest one not in a request;
// when every connection is in a request, the new one is closed.
func TestConnsEvictTheOldestWaiting(t *testing.T) {
	c := newConns(3)
	a, b, d, e, f := &closeCounter{}, &closeCounter{}, &closeCounter{}, &closeCounter{}, &closeCounter{}
	c.state(a, http.StateNew)
	c.state(a, http.StateActive)
	c.state(a, http.StateIdle) // a is idle, the oldest waiting
	c.state(b, http.StateNew)
	c.state(b, http.StateActive)
	c.state(d, http.StateNew) // d waits for its first request
	c.state(e, http.StateNew)
	if !a.closed || b.closed || d.closed || e.closed || c.count() != 3 {
		t.Fatalf("at the cap: closed a=%v b=%v d=%v e=%v, %d open; want only a closed, 3 open", a.closed, b.closed, d.closed, e.closed, c.count())
	}
	c.state(a, http.StateClosed) // the eviction's own close, already forgotten
	c.state(d, http.StateActive)
	c.state(e, http.StateActive)
	c.state(f, http.StateNew)
	if !f.closed || c.count() != 3 {
		t.Fatalf("all in requests: the new connection closed=%v, %d open; want it closed and 3 open", f.closed, c.count())
	}
	c.state(b, http.StateClosed)
	c.state(f, http.StateClosed)
	if c.count() != 2 {
		t.Fatalf("%d open after b closed, want 2", c.count())
	}
}
