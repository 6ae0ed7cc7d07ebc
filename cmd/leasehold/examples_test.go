package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/testproc"
)

// An example line, split as sh would split it: pipeline stages of words,
// each word unquoted.
type shellLine [][]string

// splitShell splits a line of an example into pipeline stages and words,
// taking quotes and backslashes as sh does. It refuses what a plain word
// list cannot carry: expansions, redirections, other operators.
func splitShell(line string) (shellLine, error) {
	var stages shellLine
	var words []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			endWord()
		case c == '|':
			endWord()
			if len(words) == 0 {
				return nil, fmt.Errorf("an empty pipeline stage")
			}
			stages, words = append(stages, words), nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("an unclosed single quote")
			}
			word.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(line) {
					return nil, fmt.Errorf("an unclosed double quote")
				}
				if line[i] == '"' {
					break
				}
				if strings.IndexByte("$`", line[i]) >= 0 {
					return nil, fmt.Errorf("an expansion in double quotes")
				}
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
				}
				word.WriteByte(line[i])
			}
		case c == '\\':
			if i+1 < len(line) {
				i++
				word.WriteByte(line[i])
				inWord = true
			}
		case strings.IndexByte("$`;&<>()", c) >= 0:
			return nil, fmt.Errorf("%q, which this test does not run", c)
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	endWord()
	if len(words) == 0 {
		return nil, fmt.Errorf("an empty pipeline stage")
	}
	return append(stages, words), nil
}

var envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// command returns the stage's words after its variable assignments.
func command(stage []string) (assignments, argv []string) {
	i := 0
	for i < len(stage) && envAssignment.MatchString(stage[i]) {
		i++
	}
	return stage[:i], stage[i:]
}

func shQuote(w string) string { return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'" }

// String writes the line back for sh, every word quoted.
func (l shellLine) String() string {
	var stages []string
	for _, st := range l {
		var ws []string
		for _, w := range st {
			if name, value, ok := strings.Cut(w, "="); ok && envAssignment.MatchString(w) {
				ws = append(ws, name+"="+shQuote(value))
			} else {
				ws = append(ws, shQuote(w))
			}
		}
		stages = append(stages, strings.Join(ws, " "))
	}
	return strings.Join(stages, " | ")
}

// globalValueFlags are the root's flags that take a value.
var globalValueFlags = []string{"--db", "--schema", "--log-level", "--log-format"}

// leaseholdRun is one leasehold stage of an example, as the test runs it.
type leaseholdRun struct {
	// path is the command's path below leasehold ("dead purge").
	path string
	// queue is the --queue the example names, ids those it names with --id.
	queue string
	ids   []string
	// handler is work's CMD.
	handler string
}

// adapt rewrites the arguments of a leasehold stage (argv[0] is
// "leasehold") so that the example runs in a test, by these rules, and
// tells what it runs:
//   - --db names the test's database, leasehold.db in the example's
//     directory, and --schema, which only PostgreSQL takes, is left out;
//     --log-level is debug, so that a command that runs until a signal
//     says when it listens for one;
//   - work gets --drain, so that it ends once its queue is empty;
//   - serve listens on port 0 of the host it names (127.0.0.1 by default);
//   - bench runs 1 s, or 1000 messages at most.
func adapt(root *cobra.Command, argv []string) ([]string, leaseholdRun, error) {
	var run leaseholdRun
	c, _, err := root.Find(argv[1:])
	if err != nil {
		return nil, run, err
	}
	run.path = strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
	out := []string{"leasehold", "--db", "leasehold.db", "--log-level", "debug"}
	dash, hasAddr := false, false
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if dash {
			if run.handler == "" {
				run.handler = a
			}
			out = append(out, a)
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		takesValue := !hasValue && i+1 < len(argv) && strings.HasPrefix(a, "--")
		next := func() string {
			if hasValue {
				return value
			}
			i++
			return argv[i]
		}
		switch {
		case a == "--":
			dash = true
			out = append(out, a)
		case slices.Contains(globalValueFlags, name) && (hasValue || takesValue):
			next() // set above
		case name == "--queue" && (hasValue || takesValue):
			run.queue = next()
			out = append(out, "--queue", run.queue)
		case name == "--id" && (hasValue || takesValue):
			id := next()
			run.ids = append(run.ids, id)
			out = append(out, "--id", id)
		case name == "--addr" && (hasValue || takesValue):
			hasAddr = true
			host, _, _ := net.SplitHostPort(next())
			out = append(out, "--addr", net.JoinHostPort(host, "0"))
		case name == "--duration" && (hasValue || takesValue):
			next()
			out = append(out, "--duration", "1s")
		case name == "--messages" && (hasValue || takesValue):
			n, err := strconv.Atoi(next())
			if err != nil || n > 1000 {
				n = 1000
			}
			out = append(out, "--messages", strconv.Itoa(n))
		default:
			out = append(out, a)
		}
	}
	switch run.path {
	case "work":
		if i := slices.Index(out, "--"); i >= 0 && !slices.Contains(out[:i], "--drain") {
			out = slices.Insert(out, i, "--drain")
		}
	case "serve":
		if !hasAddr {
			out = append(out, "--addr", "127.0.0.1:0")
		}
	}
	return out, run, nil
}

// exampleFile matches a word that names a file in the example's
// directory: photo.png, ./send-email.sh, '*.log'.
var exampleFile = regexp.MustCompile(`^(\./)?[A-Za-z0-9_*-][A-Za-z0-9_.*-]*\.(sh|png|jpg|csv|log|txt|json|pem|crt|key)$`)

// writeFixtures creates, in dir, the files the example's words name: a
// script that reads its input for NAME.sh, a self-signed certificate or
// its key for NAME.pem/.crt/.key ("key" in the name), a few bytes for
// other files; a glob gets one file that matches it.
func writeFixtures(t *testing.T, dir string, l shellLine) {
	t.Helper()
	for _, st := range l {
		for _, w := range st {
			if !exampleFile.MatchString(w) {
				continue
			}
			name := filepath.Join(dir, strings.ReplaceAll(w, "*", "example"))
			body, mode := []byte("example "+w+"\n"), os.FileMode(0o644)
			switch ext := filepath.Ext(w); {
			case ext == ".sh":
				body, mode = []byte("#!/bin/sh\ncat >/dev/null\n"), 0o755
			case ext == ".pem" || ext == ".crt" || ext == ".key":
				cert, key := selfSigned(t)
				body, mode = cert, 0o600
				if strings.Contains(filepath.Base(w), "key") {
					body = key
				}
			}
			if err := os.WriteFile(name, body, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// selfSigned returns one certificate for localhost and 127.0.0.1 and its
// key, in PEM, the same for every call of a test.
var selfSigned = func() func(t *testing.T) (cert, key []byte) {
	var cert, key []byte
	return func(t *testing.T) ([]byte, []byte) {
		t.Helper()
		if cert != nil {
			return cert, key
		}
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
		return cert, key
	}
}()

type example struct{ command, line string }

// helpExamples lists every line of every command's Example text.
func helpExamples(c *cobra.Command) []example {
	var out []example
	for _, l := range strings.Split(c.Example, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, example{c.CommandPath(), l})
		}
	}
	for _, sub := range c.Commands() {
		out = append(out, helpExamples(sub)...)
	}
	return out
}

// Every line of every command's --help examples that runs leasehold runs:
// against a fresh, migrated SQLite database whose queue (the one the
// example names) holds messages 1 to 20, those it names with --id dead, in
// a directory with the files it names, with the variables it sets. A
// command that runs until a signal (serve, reap) gets SIGTERM once it
// listens for one, after serve answered /healthz; each must then exit 0
// too. Lines that run another tool only (aws ..., go run ...) are skipped.
func TestHelpExamplesRun(t *testing.T) {
	t.Parallel()
	bin := leaseholdBin(t)
	examples := helpExamples((&app{}).rootCommand())
	if len(examples) < 20 {
		t.Fatalf("found %d examples; the walk of the command tree is broken", len(examples))
	}
	for i, ex := range examples {
		t.Run(fmt.Sprintf("%02d %s", i, ex.line), func(t *testing.T) {
			t.Parallel()
			line, err := splitShell(ex.line)
			if err != nil {
				t.Fatalf("%s example %q: %v", ex.command, ex.line, err)
			}
			var runs []leaseholdRun
			for j, st := range line {
				env, argv := command(st)
				if len(argv) == 0 || argv[0] != "leasehold" {
					continue
				}
				// Finding a command changes the tree: each example has its own.
				adapted, run, err := adapt((&app{}).rootCommand(), argv)
				if err != nil {
					t.Fatalf("%s example %q: %v", ex.command, ex.line, err)
				}
				line[j] = append(slices.Clip(env), adapted...)
				runs = append(runs, run)
			}
			if len(runs) == 0 {
				t.Skipf("%s example %q runs no leasehold command", ex.command, ex.line)
			}
			dir := t.TempDir()
			writeFixtures(t, dir, line)
			// Tools the machine lacks, run by work, are stood in for by a
			// script that reads its input.
			stubs := t.TempDir()
			for _, r := range runs {
				if r.handler == "" || strings.Contains(r.handler, "/") {
					continue
				}
				if _, err := exec.LookPath(r.handler); err != nil {
					t.Logf("%s is not installed: a script that reads its input stands in for it", r.handler)
					if err := os.WriteFile(filepath.Join(stubs, r.handler), []byte("#!/bin/sh\ncat >/dev/null\n"), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			env := append(os.Environ(), "LEASEHOLD_DB=", "PATH="+filepath.Dir(bin)+":"+stubs+":"+os.Getenv("PATH"))
			seedExample(t, dir, env, runs)
			serves := slices.ContainsFunc(runs, func(r leaseholdRun) bool { return r.path == "serve" })
			runExample(t, dir, env, ex, line, serves)
		})
	}
}

// seedExample migrates the example's database and fills the queues of its
// runs.
func seedExample(t *testing.T, dir string, env []string, runs []leaseholdRun) {
	t.Helper()
	steps := [][]string{{"migrate"}}
	var in strings.Builder
	for n := 1; n <= 20; n++ {
		fmt.Fprintf(&in, "%d\n", n)
	}
	for _, r := range runs {
		if r.queue == "" {
			continue
		}
		steps = append(steps, []string{"enqueue", "--queue", r.queue, "--max-deliveries", "1"})
		if len(r.ids) > 0 {
			dead := " " + strings.Join(r.ids, " ") + " "
			steps = append(steps, []string{"work", "--queue", r.queue, "--drain", "--", "sh", "-c",
				fmt.Sprintf(`cat >/dev/null; case %q in *" $LEASEHOLD_MESSAGE_ID "*) exit 65;; esac`, dead)})
		}
	}
	for _, s := range steps {
		cmd := exec.Command(leaseholdBin(t), append([]string{"--db", "leasehold.db", "--log-level", "error"}, s...)...)
		cmd.Dir, cmd.Env = dir, env
		if s[0] == "enqueue" {
			cmd.Stdin = strings.NewReader(in.String())
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("seed: leasehold %v: %v\n%s", s, err, out)
		}
	}
}

var servingAt = regexp.MustCompile(`addr=(https?://\S+)`)

// runExample runs line with sh in dir and wants exit status 0; one that
// says it runs until a signal gets SIGTERM, once it answered /healthz
// when it serves.
func runExample(t *testing.T, dir string, env []string, ex example, line shellLine, serves bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if len(line) == 1 {
		// The signal goes to leasehold itself, not to a shell.
		env, argv := command(line[0])
		line = shellLine{append(append(slices.Clip(env), "exec"), argv...)}
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", line.String())
	cmd.Dir, cmd.Env = dir, env
	stdout, stderr := &testproc.SyncBuffer{}, &testproc.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	signalled := false
	t0 := time.Now()
wait:
	for {
		select {
		case err = <-exited:
			break wait
		case <-time.After(20 * time.Millisecond): // polling a real process's output
		}
		if signalled || !strings.Contains(stderr.String(), "running until SIGTERM or SIGINT") {
			continue
		}
		m := servingAt.FindStringSubmatch(stderr.String())
		if serves && m == nil && time.Since(t0) < 30*time.Second {
			continue // serve logs its address once it listens, after the line above
		}
		if serves && m == nil {
			_ = cmd.Process.Kill()
			t.Fatalf("%s example %q: serve did not log its address as addr=URL\n%s", ex.command, ex.line, stderr)
		}
		if m != nil {
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			resp, herr := client.Get(m[1] + "/healthz")
			if herr != nil {
				_ = cmd.Process.Kill()
				t.Fatalf("%s example %q: GET /healthz: %v\n%s", ex.command, ex.line, herr, stderr)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s example %q: GET /healthz: %s", ex.command, ex.line, resp.Status)
			}
			t.Logf("%s answered /healthz: %s", m[1], resp.Status)
		}
		if serr := cmd.Process.Signal(syscall.SIGTERM); serr != nil {
			t.Fatal(serr)
		}
		signalled = true
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	how := "ran"
	if signalled {
		how = "ran until SIGTERM"
	}
	if err != nil {
		t.Fatalf("%s example %q %s as %s: %v\nstdout: %s\nstderr: %s", ex.command, ex.line, how, line, err, stdout, stderr)
	}
	t.Logf("%s example %q %s in %s as %s", ex.command, ex.line, how, time.Since(t0).Round(time.Millisecond), line)
}
