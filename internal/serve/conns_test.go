package serve

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
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

// serveDeadlines serves h behind deadlines(h, body, 10s) on a loopback
// listener.
func serveDeadlines(t *testing.T, h http.Handler, body time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: deadlines(h, body, 10*time.Second), ReadHeaderTimeout: headerTimeout}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// A body that does not arrive in time ends its connection; a body that
// did arrive leaves the request to run past that time, as a long poll
// does, its context alive.
func TestDeadlinesCutSlowBodiesNotLongPolls(t *testing.T) {
	const body = 300 * time.Millisecond
	wall := clock.System()
	polled := make(chan error, 1)
	addr := serveDeadlines(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		// A long poll of three body timeouts, watching its context as the
		// SQS API's long polls do.
		poll := wall.NewTimer(3 * body)
		defer poll.Stop()
		select {
		case <-r.Context().Done():
			polled <- r.Context().Err()
		case <-poll.C():
			polled <- nil
		}
	}), body)

	res, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{"WaitTimeSeconds":20}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if err := <-polled; err != nil {
		t.Fatalf("a long poll after its body arrived was cut: %v", err)
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	// The bound is generous real time: the server's deadline is 300 ms.
	_ = c.SetReadDeadline(wall.Now().Add(10 * time.Second))
	start := wall.Monotonic()
	_, err = io.Copy(io.Discard, c)
	if err != nil {
		t.Fatalf("a slow body's connection was not closed by the server: %v", err)
	}
	if took := wall.Monotonic() - start; took < body {
		t.Fatalf("a slow body's connection closed after %v, before its deadline of %v", took, body)
	}
}
