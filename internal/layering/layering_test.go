package layering_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/leasehold/leasehold"

// testOnly are the test kits that tests may import from anywhere: the
// conformance suite every backend runs, the PostgreSQL schema per test,
// and the kit for users' tests, which the root package's own tests use.
var testOnly = map[string]bool{module + "/store/storetest": true, module + "/internal/pgtest": true, module + "/leaseholdtest": true}

// layers reads the README's layout table: each package's row, from the
// bottom up.
func layers(t *testing.T, root string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "## Layout")
	if i < 0 {
		t.Fatal("README.md has no Layout section")
	}
	row := regexp.MustCompile("(?m)^\\| (`[^|]+) \\|")
	name := regexp.MustCompile("`([^` ]+)`")
	out := map[string]int{}
	for n, m := range row.FindAllStringSubmatch(text[i:], -1) {
		for _, p := range name.FindAllStringSubmatch(m[1], -1) {
			path := module
			if p[1] != "leasehold" {
				path += "/" + p[1]
			}
			out[path] = n
		}
	}
	return out
}

func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	layer := layers(t, root)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}|{{join .TestImports \",\"}},{{join .XTestImports \",\"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		pkg := f[0]
		at, ok := layer[pkg]
		if !ok {
			t.Errorf("%s is not in the README's layout table", pkg)
			continue
		}
		check := func(imports string, test bool) {
			for _, imp := range strings.Split(imports, ",") {
				to, ok := layer[imp]
				if !ok || imp == pkg || to <= at || test && testOnly[imp] {
					continue
				}
				kind := "imports"
				if test {
					kind = "tests import"
				}
				t.Errorf("%s %s %s, which the layout table lists after it", pkg, kind, imp)
			}
		}
		check(f[1], false)
		check(f[2], true)
	}
}
