package sqlstate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// statementConst is how a backend names a statement of its queries.sql: a
// constant qX, listed with its name in the file in queryNames.
var statementConst = regexp.MustCompile(`^q[A-Z]`)

// Each SQL backend runs every statement of its queries.sql, and every
// statement it asks for is there: each constant that names one is listed
// in queryNames (Load reads those) and used outside its declaration and
// that list, and queryNames holds the file's names and no others.
func TestBackendsRunEveryStatement(t *testing.T) {
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			dir := filepath.Join("..", "..", "store", backend)
			b, err := os.ReadFile(filepath.Join(dir, "queries.sql"))
			if err != nil {
				t.Fatal(err)
			}
			inFile := statementNames(string(b))
			listed, declared, used := readStatementConsts(t, dir)
			if len(listed) == 0 {
				t.Fatal("no queryNames")
			}
			var names []string
			for c, name := range listed {
				names = append(names, name)
				if !slices.Contains(inFile, name) {
					t.Errorf("%s names %q, which queries.sql lacks", c, name)
				}
			}
			for _, name := range inFile {
				if !slices.Contains(names, name) {
					t.Errorf("queries.sql has %q, which no constant of queryNames names", name)
				}
			}
			slices.Sort(names)
			if len(slices.Compact(names)) != len(listed) {
				t.Errorf("queryNames names a statement twice")
			}
			for _, c := range declared {
				if _, ok := listed[c]; !ok {
					t.Errorf("%s is not in queryNames", c)
				}
				if !used[c] {
					t.Errorf("%s is declared but never run", c)
				}
			}
		})
	}
}

// readStatementConsts reads the package in dir, leaving out its tests: the
// constants queryNames lists and the names it gives them, the statement
// constants declared, and those used elsewhere.
func readStatementConsts(t *testing.T, dir string) (listed map[string]string, declared []string, used map[string]bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	listed, used = map[string]string{}, map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Identifiers in a constant's declaration or in queryNames are not
		// uses.
		skip := map[*ast.Ident]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					for _, id := range spec.(*ast.ValueSpec).Names {
						if statementConst.MatchString(id.Name) {
							declared = append(declared, id.Name)
							skip[id] = true
						}
					}
				}
			case *ast.ValueSpec:
				if len(n.Names) != 1 || n.Names[0].Name != "queryNames" || len(n.Values) != 1 {
					return true
				}
				lit, ok := n.Values[0].(*ast.CompositeLit)
				if !ok {
					t.Fatalf("%s: queryNames is not a composite literal", path)
				}
				for _, e := range lit.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						t.Fatalf("%s: queryNames has an element without its constant", path)
					}
					id, okID := kv.Key.(*ast.Ident)
					s, okLit := kv.Value.(*ast.BasicLit)
					if !okID || !okLit {
						t.Fatalf("%s: queryNames has an element that is not constant: name", path)
					}
					name, err := strconv.Unquote(s.Value)
					if err != nil {
						t.Fatal(err)
					}
					listed[id.Name] = name
					skip[id] = true
				}
			case *ast.Ident:
				if !skip[n] && statementConst.MatchString(n.Name) {
					used[n.Name] = true
				}
			}
			return true
		})
	}
	return listed, declared, used
}
