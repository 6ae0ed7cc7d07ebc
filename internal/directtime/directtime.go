// Package directtime finds Go code that reads or waits on time without going
// through package clock. leasehold's tests run on injected clocks; one direct
// time.Now in a component makes its tests depend on the real time.
package directtime

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Forbidden lists the functions of package time that bypass the clock.
var Forbidden = map[string]bool{
	"Now": true, "Sleep": true, "After": true, "AfterFunc": true, "NewTimer": true,
	"NewTicker": true, "Tick": true, "Since": true, "Until": true,
}

// Violation is one use of a forbidden function.
type Violation struct {
	Pos  token.Position
	Name string // for example "time.Now"
}

func (v Violation) String() string {
	return fmt.Sprintf("%s:%d: %s bypasses package clock", v.Pos.Filename, v.Pos.Line, v.Name)
}

// Check parses every non-test Go file under root and returns each use
// (call or function value) of a forbidden time function. It skips test
// files, testdata, hidden folders, modules of their own (a folder below
// root with a go.mod, such as a benchmark of another library), and every
// folder whose slash-separated path relative to root is in exempt, with
// what lies below it.
func Check(root string, exempt ...string) ([]Violation, error) {
	var out []Violation
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			for _, e := range exempt {
				if rel == e {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("directtime: %w", err)
		}
		out = append(out, checkFile(fset, f)...)
		return nil
	})
	return out, err
}

func checkFile(fset *token.FileSet, f *ast.File) []Violation {
	var out []Violation
	names := map[string]bool{} // the names package time goes by in f
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			names["time"] = true
		case imp.Name.Name == ".":
			out = append(out, Violation{Pos: fset.Position(imp.Pos()), Name: `import . "time"`})
		case imp.Name.Name != "_":
			names[imp.Name.Name] = true
		}
	}
	if len(names) == 0 {
		return out
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] && Forbidden[sel.Sel.Name] {
			out = append(out, Violation{Pos: fset.Position(sel.Pos()), Name: "time." + sel.Sel.Name})
		}
		return true
	})
	return out
}
