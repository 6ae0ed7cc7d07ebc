package main

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve refuses, before it touches the database, to take unsigned
// requests from beyond this machine, and a half-given key pair.
func TestServeRefusesUnsafeSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "never.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", db, "serve", "--addr", "0.0.0.0:9324"}, "refusing to listen on 0.0.0.0:9324 without credentials"},
		{[]string{"--db", db, "serve", "--addr", ":9324"}, "refusing to listen on :9324 without credentials"},
		{[]string{"--db", db, "serve", "--reap-interval", "0s"}, "--reap-interval and --shutdown-timeout must be positive"},
	} {
		r := runBin(t, dir, "", tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("leasehold %v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("a refused serve created the database: %v", err)
	}
}

// serve refuses weak secrets and plain HTTP off loopback, each with one
// line that names the fix, before it touches the database.
func TestServeRefusesWeakSecretsAndPlainHTTP(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "never.db")
	const good = "sixteen-chars-ok"
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"LEASEHOLD_SECRET_ACCESS_KEY": "short"}, nil, "the secret access key has 5 characters, needs at least 16"},
		{map[string]string{"LEASEHOLD_DASHBOARD_PASSWORD": "short"}, nil, "the dashboard password has 5 characters, needs at least 16"},
		{map[string]string{"LEASEHOLD_METRICS_TOKEN": "short"}, nil, "the metrics token has 5 characters, needs at least 16"},
		{nil, []string{"--addr", "0.0.0.0:9324"}, "refusing plain HTTP on 0.0.0.0:9324: set --tls-cert and --tls-key, or --behind-tls-proxy"},
		{nil, []string{"--tls-cert", "c.pem"}, "set both the TLS certificate and the TLS key, or neither"},
	} {
		t.Setenv("LEASEHOLD_ACCESS_KEY_ID", "AKID")
		for _, v := range []string{"LEASEHOLD_SECRET_ACCESS_KEY", "LEASEHOLD_DASHBOARD_PASSWORD", "LEASEHOLD_METRICS_TOKEN"} {
			t.Setenv(v, cmp.Or(tc.env[v], good))
		}
		args := append([]string{"--db", db, "serve"}, tc.args...)
		r := runBin(t, dir, "", args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("leasehold %v with %v: exit %d, stderr %q; want exit 2 and one line with %q", args, tc.env, r.code, r.stderr, tc.want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("a refused serve created the database: %v", err)
	}
}

// testCA is a certificate authority a test makes, and the leaf
// certificates it signs for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leasehold test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a certificate for 127.0.0.1 named cn and its key to the
// two files, replacing them.
func (ca *testCA) issue(t *testing.T, cn string, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, kind string, b []byte) {
		if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certFile, "CERTIFICATE", der)
	write(keyFile, "PRIVATE KEY", keyDER)
}

// serving is the address a serve process logs once it serves.
var serving = regexp.MustCompile(`addr=https://(127\.0\.0\.1:\d+)`)

// serve speaks TLS with the pair it is given, HTTP/1.1 only, and a
// SIGHUP serves a replaced pair to new connections; a pair that does not
// load is logged and the old one stays. Plain HTTP gets no answer of the
// API's.
func TestServeTLSReloadsOnHangup(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca := newTestCA(t)
	ca.issue(t, "first", 2, certFile, keyFile)
	t.Setenv("LEASEHOLD_ACCESS_KEY_ID", "AKID")
	t.Setenv("LEASEHOLD_SECRET_ACCESS_KEY", "secret-access-key-for-tests")
	t.Setenv("LEASEHOLD_METRICS_TOKEN", "metrics-token-for-tests")
	cmd, stderr := startProcess(t, dir, "--db", filepath.Join(dir, "q.db"), "serve", "--addr", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile)
	var addr string
	waitUntil(t, "the server's serving line", func() bool {
		m := serving.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})

	// served is the name of the certificate a new connection gets, and
	// the status of GET path on it.
	served := func(path string, hdr map[string]string) (string, int) {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("GET https://%s%s: %v", addr, path, err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName, resp.StatusCode
	}
	if cn, code := served("/healthz", nil); cn != "first" || code != 200 {
		t.Fatalf("over TLS: certificate %q, /healthz %d", cn, code)
	}
	// A client that offers HTTP/2 gets HTTP/1.1: the server's limits are
	// those of its HTTP/1.1 connections.
	h2 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}, ForceAttemptHTTP2: true}
	resp, err := (&http.Client{Transport: h2, Timeout: 30 * time.Second}).Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz offering HTTP/2: %v", err)
	}
	resp.Body.Close()
	h2.CloseIdleConnections()
	if resp.ProtoMajor != 1 || resp.TLS.NegotiatedProtocol == "h2" {
		t.Fatalf("a client offering HTTP/2 got %s (ALPN %q), want HTTP/1.1", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
	if _, code := served("/metrics", map[string]string{"Authorization": "Bearer metrics-token-for-tests"}); code != 200 {
		t.Fatalf("/metrics with the token over TLS: %d", code)
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP got an answer over the TLS listener")
		}
	}

	hangup := func(want string, n int) {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the log line "+want, func() bool { return strings.Count(stderr.String(), want) == n })
	}
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangup("the TLS certificate was not reloaded", 1)
	if cn, code := served("/healthz", nil); cn != "first" || code != 200 {
		t.Fatalf("after a bad pair: certificate %q, /healthz %d; want the old one", cn, code)
	}
	ca.issue(t, "second", 3, certFile, keyFile)
	hangup("the TLS certificate was reloaded", 1)
	if cn, code := served("/healthz", nil); cn != "second" || code != 200 {
		t.Fatalf("after SIGHUP: certificate %q, /healthz %d; want the new one", cn, code)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}
}

// /readyz answers 503 within its second when the database hangs, instead
// of waiting for it: a real server on PostgreSQL through a proxy that
// stops passing bytes. The bound asserted is 5 s, for a check whose
// deadline is 1 s.
func TestServeReadyzAnswersWhenTheDatabaseHangs(t *testing.T) {
	dsn := freshDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newDBProxy(t, u.Host, false)
	u.Host = proxy.addr
	dir := t.TempDir()
	runBin(t, dir, "", "--db", dsn, "migrate").must(t)
	_, stderr := startProcess(t, dir, "--db", u.String(), "serve", "--addr", "127.0.0.1:0")
	var addr string
	plain := regexp.MustCompile(`addr=http://(127\.0\.0\.1:\d+)`)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's output:\n%s", stderr.String())
		}
	})
	waitUntil(t, "the server's serving line", func() bool {
		m := plain.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	c := &http.Client{Timeout: 30 * time.Second}
	readyz := func() (int, string, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := c.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	if code, body, _ := readyz(); code != 200 {
		t.Fatalf("/readyz before the database hangs: %d %s", code, body)
	}
	proxy.freeze()
	// The answer before the freeze is given again for up to a second;
	// the check after it is the one that meets the hung database.
	code, body, took := readyz()
	for deadline := time.Now().Add(5 * time.Second); code == 200 && time.Now().Before(deadline); {
		code, body, took = readyz()
	}
	t.Logf("/readyz of a hung database: %d in %s: %s", code, took, strings.TrimSpace(body))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "did not commit a write within 1s") {
		t.Fatalf("/readyz of a hung database = %d %q, want 503 naming the deadline", code, body)
	}
	if took > 5*time.Second {
		t.Fatalf("/readyz of a hung database took %s, want about 1 s", took)
	}
}
