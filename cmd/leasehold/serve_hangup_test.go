package main

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A SIGHUP while serve still opens its database does not end it, nor
// does one once it serves: without TLS, it is logged and changes nothing.
func TestServeSurvivesAnEarlyHangup(t *testing.T) {
	dsn := freshDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	g := newDBProxy(t, u.Host, true)
	u.Host = g.addr
	dir := t.TempDir()
	runBin(t, dir, "", "--db", dsn, "migrate").must(t)
	cmd, stderr := startProcess(t, dir, "--db", u.String(), "serve", "--addr", "127.0.0.1:0")
	// exited closes once serve was waited for, with its end in ended.
	exited := make(chan struct{})
	var ended error
	go func() {
		ended = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("serve's output:\n%s", stderr.String())
		}
	})
	select {
	case <-g.connected: // serve is opening its database
	case <-exited:
		t.Fatalf("serve ended before it reached its database: %v", ended)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.open()
	plain := regexp.MustCompile(`addr=http://(127\.0\.0\.1:\d+)`)
	var addr string
	gone := false
	waitUntil(t, "the server's serving line or its end", func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		if m := plain.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
			return true
		}
		return false
	})
	if gone {
		t.Fatalf("a SIGHUP while serve opened its database ended it: %v", ended)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	const noted = "serve has no TLS certificate to reload"
	waitUntil(t, "the early SIGHUP's log line", func() bool { return strings.Count(stderr.String(), noted) == 1 })
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the second SIGHUP's log line", func() bool { return strings.Count(stderr.String(), noted) == 2 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if <-exited; ended != nil {
		t.Fatalf("serve after SIGTERM: %v", ended)
	}
}
