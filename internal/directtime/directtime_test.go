package directtime_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/directtime"
)

// TestModuleUsesOnlyTheClock enforces the rule for the whole module: outside
// package clock, no non-test code touches the time package's clock.
func TestModuleUsesOnlyTheClock(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	vs, err := directtime.Check(root, "clock")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("%s (use package clock)", v)
	}
}

// TestCheckFindsDirectCalls shows that the check fails when such a call is
// added: it runs on a small module written for the test.
func TestCheckFindsDirectCalls(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("worker/worker.go", `package worker

import (
	"time"
	tm "time"
)

func Run() {
	start := time.Now()
	_ = start
	tm.Sleep(time.Second) // aliased import, and time.Second is allowed
	f := time.Since
	_ = f
}
`)
	write("clean/clean.go", `package clean

import "time"

func D() time.Duration { return 3 * time.Second }
`)
	write("worker/worker_test.go", "package worker\n\nimport \"time\"\n\nvar _ = time.Now()\n")
	write("clock/system.go", "package clock\n\nimport \"time\"\n\nvar _ = time.Now()\n")
	write("worker/testdata/x.go", "package x\n\nimport \"time\"\n\nvar _ = time.Now()\n")
	write("bench/other/go.mod", "module other\n")
	write("bench/other/main.go", "package main\n\nimport \"time\"\n\nvar _ = time.Now()\n")

	vs, err := directtime.Check(root, "clock")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		rel, _ := filepath.Rel(root, v.Pos.Filename)
		got = append(got, filepath.ToSlash(rel)+":"+strconv.Itoa(v.Pos.Line)+":"+v.Name)
	}
	want := []string{"worker/worker.go:9:time.Now", "worker/worker.go:11:time.Sleep", "worker/worker.go:12:time.Since"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("violations:\n got  %v\n want %v", got, want)
	}
	if !strings.Contains(vs[0].String(), "worker.go:9") {
		t.Fatalf("violation text %q does not name file and line", vs[0])
	}
}
