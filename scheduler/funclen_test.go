package scheduler

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the loop (its declaration to its
// closing brace): a step that grows past it is to be split, so that each
// can be read whole.
const maxFuncLines = 80

// TestFunctionLength fails on a function of the package's (and its
// subpackages') code, tests aside, longer than maxFuncLines.
func TestFunctionLength(t *testing.T) {
	long, err := longFunctions(".", maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range long {
		t.Errorf("%s is %d lines, more than %d: split it into steps", f.name, f.lines, maxFuncLines)
	}
}

type funcLen struct {
	name  string
	lines int
}

// longFunctions lists the functions under dir (non-test files) longer
// than limit lines, longest first.
func longFunctions(dir string, limit int) ([]funcLen, error) {
	var out []funcLen
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > limit {
				name := fn.Name.Name
				if fn.Recv != nil && len(fn.Recv.List) > 0 {
					name = recvName(fn.Recv.List[0].Type) + "." + name
				}
				out = append(out, funcLen{name: path + ": " + name, lines: n})
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].lines > out[j].lines })
	return out, err
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
