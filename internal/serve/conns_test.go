package serve

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
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
	start := wall.Monotonic()
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	// The server's deadline starts once it has the request's head, after
	// start. The client's bound is generous real time: the server's
	// deadline is 300 ms.
	_ = c.SetReadDeadline(wall.Now().Add(10 * time.Second))
	_, err = io.Copy(io.Discard, c)
	if err != nil {
		t.Fatalf("a slow body's connection was not closed by the server: %v", err)
	}
	if took := wall.Monotonic() - start; took < body {
		t.Fatalf("a slow body's connection closed after %v, before its deadline of %v", took, body)
	}
}

// The response's deadline counts from the end of the body, so that a
// body that was slow to come, or waited for room, leaves a long poll its
// whole time: here the handler answers past the deadline as counted from
// the request's start, within it as counted from the body's end.
func TestWriteDeadlineCountsFromTheBody(t *testing.T) {
	const write = time.Second
	wall := clock.System()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: headerTimeout, Handler: deadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := wall.Now()
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		// The client sends the body's end 800 ms after its head: answer
		// 200 ms past the deadline counted from the start.
		_ = wall.Sleep(r.Context(), began.Add(write+200*time.Millisecond).Sub(wall.Now()))
		_, _ = io.WriteString(w, "polled")
	}), 10*time.Second, write)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(wall.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	_ = wall.Sleep(context.Background(), 800*time.Millisecond)
	if _, err := io.WriteString(c, "}"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the answer of a request whose body came late: %v", err)
	}
	defer res.Body.Close()
	if body, err := io.ReadAll(res.Body); err != nil || string(body) != "polled" {
		t.Fatalf("the answer of a request whose body came late: %q, %v", body, err)
	}
}

// Evicting a connection does not wait on its peer: the hook runs on the
// goroutine that accepts connections, and a TLS connection's Close waits
// for its close_notify to be taken, which a peer that stopped reading
// never does.
func TestEvictionDoesNotWaitOnThePeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cert := selfSigned(t)
		near, far := net.Pipe()
		server := tls.Server(near, &tls.Config{Certificates: []tls.Certificate{cert}})
		client := tls.Client(far, &tls.Config{InsecureSkipVerify: true})
		shook := make(chan error, 1)
		go func() { shook <- client.Handshake() }()
		if err := server.Handshake(); err != nil {
			t.Fatal(err)
		}
		if err := <-shook; err != nil {
			t.Fatal(err)
		}
		// The client reads no more.
		c := newConns(1)
		c.state(server, http.StateNew)
		c.state(server, http.StateActive)
		c.state(server, http.StateIdle)
		evicted := make(chan struct{})
		go func() {
			c.state(&closeCounter{}, http.StateNew)
			close(evicted)
		}()
		synctest.Wait()
		select {
		case <-evicted:
		default:
			t.Error("the eviction of a TLS connection waits on a peer that does not read")
		}
		<-evicted
		client.Close()
	})
}

// selfSigned is a certificate for TLS tests.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotAfter: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// The default connection cap is at most maxDefaultConns, however many
// files the process may open.
func TestDefaultConnectionCapIsBounded(t *testing.T) {
	if n := connLimit(); n < 16 || n > maxDefaultConns {
		t.Fatalf("the default connection cap is %d, want 16 to %d", n, maxDefaultConns)
	}
}
