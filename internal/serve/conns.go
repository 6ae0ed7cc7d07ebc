package serve

import (
	"container/list"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// What a connection may take of the server. Timeouts are real time,
// whatever Config.Clock is: they are deadlines on sockets.
const (
	// headerTimeout bounds how long a request's headers take to arrive,
	// and how long a new connection may wait before it sends one.
	headerTimeout = 10 * time.Second
	// bodyTimeout bounds how long a request's body takes to arrive once
	// its headers have.
	bodyTimeout = 30 * time.Second
	// idleTimeout is how long a kept-alive connection may wait for its
	// next request: longer than the AWS SDKs keep an idle connection (90
	// seconds), so that the client, not the server, closes it.
	idleTimeout = 120 * time.Second
	// writeTimeout bounds how long a response takes to be written, counted
	// from the end of the longest long poll (20 seconds, SQS's most).
	writeTimeout = 30 * time.Second
	maxLongPoll  = 20 * time.Second
	// maxHeaderBytes bounds a request's headers: the AWS SDKs send under
	// 2 KiB, a browser with cookies several.
	maxHeaderBytes = 16 << 10
)

// maxDefaultConns bounds the default connection cap, whatever the file
// descriptor limit: each open connection holds a goroutine and its
// buffers (tens of KiB with TLS), so a million of them would hold tens
// of GiB. Ten thousand serve hundreds of SDK clients, each with its
// pool of connections and its long polls; a flood of idle connections
// beyond it evicts the oldest idle ones.
const maxDefaultConns = 10_000

// connLimit derives the connection cap from the file descriptor limit,
// raised to its hard limit first: a tenth of the descriptors (at least
// 128) stay for the database, its files and the process's own, and the
// cap is at most maxDefaultConns.
func connLimit() int {
	n := raiseFileLimit()
	if n <= 0 {
		return maxDefaultConns
	}
	return min(maxDefaultConns, max(16, n-max(128, n/10)))
}

// conns caps the open connections. A connection that comes when the cap
// is reached evicts the oldest one that is not in a request (idle between
// requests, or open without having sent one), so that a flood of idle
// connections cannot keep /healthz or a client out. When every connection
// is in a request, the new one is closed.
type conns struct {
	max int

	mu sync.Mutex
	// open holds every tracked connection, with its place in waiting
	// while it is not in a request (nil while it is).
	open    map[net.Conn]*list.Element
	waiting *list.List // of net.Conn, the oldest first
}

func newConns(max int) *conns {
	return &conns{max: max, open: map[net.Conn]*list.Element{}, waiting: list.New()}
}

// state is the http.Server's ConnState hook.
func (c *conns) state(conn net.Conn, st http.ConnState) {
	var closing net.Conn
	c.mu.Lock()
	switch st {
	case http.StateNew:
		if len(c.open) >= c.max {
			if oldest := c.waiting.Front(); oldest != nil {
				closing = oldest.Value.(net.Conn)
				c.forget(closing)
			} else {
				closing = conn
				break
			}
		}
		c.open[conn] = c.waiting.PushBack(conn)
	case http.StateActive:
		if e, ok := c.open[conn]; ok && e != nil {
			c.waiting.Remove(e)
			c.open[conn] = nil
		}
	case http.StateIdle:
		if e, ok := c.open[conn]; ok {
			if e != nil {
				c.waiting.Remove(e)
			}
			c.open[conn] = c.waiting.PushBack(conn)
		}
	case http.StateHijacked, http.StateClosed:
		c.forget(conn)
	}
	c.mu.Unlock()
	if closing != nil {
		closeSocket(closing)
	}
}

// closeSocket closes conn's socket at once. A TLS connection's Close
// would first send close_notify, which waits (up to five seconds) on a
// peer that does not read; the hook that evicts runs on the goroutine
// that accepts connections, which must not wait on any peer.
func closeSocket(conn net.Conn) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	_ = conn.Close()
}

// forget stops tracking conn. Called with mu held.
func (c *conns) forget(conn net.Conn) {
	if e, ok := c.open[conn]; ok {
		if e != nil {
			c.waiting.Remove(e)
		}
		delete(c.open, conn)
	}
}

// count is how many connections are open.
func (c *conns) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// deadlines sets each request's socket deadlines: its body must arrive
// within body, and its response be written within write of the body's
// end (of the request's start, for a request without a body), so that
// neither a slow body nor a wait for room to buffer it shortens the long
// poll that follows. The read deadline ends when the body has been read
// whole: net/http then clears it, as it starts its background read of
// the connection (which watches for the client going away), so that a
// long poll runs on. Requests without a body get no read deadline for
// that reason.
func deadlines(h http.Handler, body, write time.Duration) http.Handler {
	wall := clock.System()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := wall.Now()
		_ = rc.SetWriteDeadline(now.Add(write))
		if r.ContentLength != 0 {
			_ = rc.SetReadDeadline(now.Add(body))
			// A copy of the request, not the request net/http holds:
			// net/http looks at its own body's type once the handler is
			// done.
			r = r.WithContext(r.Context())
			r.Body = &bodyEnd{ReadCloser: r.Body, left: r.ContentLength,
				end: func() { _ = rc.SetWriteDeadline(wall.Now().Add(write)) }}
		}
		h.ServeHTTP(w, r)
	})
}

// bodyEnd calls end once its body has been read whole: at its end of
// file, or once left (the declared length, if any) bytes have been read.
type bodyEnd struct {
	io.ReadCloser
	left  int64 // negative when the length is not declared
	end   func()
	ended bool
}

func (b *bodyEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	if !b.ended && (b.left == 0 || err == io.EOF) {
		b.ended = true
		b.end()
	}
	return n, err
}
