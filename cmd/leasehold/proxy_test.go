package main

import (
	"net"
	"sync"
	"testing"
)

// dbProxy is a TCP proxy to a database, for tests of one that is slow or
// hangs. Made held, it holds every connection it accepts until open is
// called: a database slow to answer. Once frozen, it stops passing bytes
// on, in both directions and on every connection, without closing them:
// a database that hangs.
type dbProxy struct {
	addr      string
	connected chan struct{} // closed at the first connection
	open      func()
	freeze    func()
}

func newDBProxy(t *testing.T, target string, held bool) *dbProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{addr: ln.Addr().String(), connected: make(chan struct{})}
	opened, frozen := make(chan struct{}), make(chan struct{})
	var openOnce, freezeOnce, first sync.Once
	p.open = func() { openOnce.Do(func() { close(opened) }) }
	p.freeze = func() { freezeOnce.Do(func() { close(frozen) }) }
	if !held {
		p.open()
	}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var all []net.Conn
	keep := func(c net.Conn) {
		mu.Lock()
		all = append(all, c)
		mu.Unlock()
	}
	pass := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-frozen:
				return // the bytes are kept back, and the connection stays open
			default:
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			keep(c)
			first.Do(func() { close(p.connected) })
			conns.Go(func() {
				<-opened
				up, err := net.Dial("tcp", target)
				if err != nil {
					c.Close()
					return
				}
				keep(up)
				conns.Go(func() { pass(up, c) })
				pass(c, up)
			})
		}
	})
	t.Cleanup(func() {
		p.open()
		ln.Close()
		mu.Lock()
		for _, c := range all {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return p
}
