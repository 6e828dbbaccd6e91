package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/internal/crashpoint"
)

var nameRE = regexp.MustCompile(`^[a-z0-9]+\.[a-z0-9]+\.[a-z0-9-]+$`)

// TestEveryPointIsMarked: every listed point is marked by some code
// outside tests (a test waiting for a point no code reaches would wait in
// vain), every Hit names a point constant, every such constant is listed
// (by the core or its backend's registration), and names are unique.
func TestEveryPointIsMarked(t *testing.T) {
	seen := map[crashpoint.Name]bool{}
	for _, n := range CrashPoints() {
		if seen[n] {
			t.Errorf("point %s listed twice", n)
		}
		seen[n] = true
		if !nameRE.MatchString(string(n)) {
			t.Errorf("point %q is not named layer.operation.what", n)
		}
	}
	files := parseSources(t, "..")
	consts := pointConsts(files)
	marked := map[crashpoint.Name]int{}
	for path, f := range files {
		dir := filepath.Dir(path)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if fn, ok := call.Fun.(*ast.SelectorExpr); !ok || fn.Sel.Name != "Hit" || !isIdent(fn.X, "crashpoint") {
				return true
			}
			// A constant of the crashpoint package (the core's), or of the
			// package marking it (a backend's).
			var key constKey
			switch arg := call.Args[1].(type) {
			case *ast.SelectorExpr:
				if !isIdent(arg.X, "crashpoint") {
					t.Errorf("%s: crashpoint.Hit with %s.%s; name a point constant", path, arg.X, arg.Sel.Name)
					return true
				}
				key = constKey{filepath.Join("..", "internal", "crashpoint"), arg.Sel.Name}
			case *ast.Ident:
				key = constKey{dir, arg.Name}
			default:
				t.Errorf("%s: crashpoint.Hit with %T; name a point constant", path, call.Args[1])
				return true
			}
			name, ok := consts[key]
			if !ok {
				t.Errorf("%s: %s is not a point constant", path, key.ident)
				return true
			}
			marked[name]++
			return true
		})
	}
	if len(consts) != len(CrashPoints()) {
		t.Errorf("%d point constants, %d points listed by CrashPoints(): list every constant in crashpoint.Core() or its backend's registration", len(consts), len(CrashPoints()))
	}
	for _, n := range CrashPoints() {
		if marked[n] == 0 {
			t.Errorf("point %s is listed but no code marks it", n)
		}
	}
	for n := range marked {
		if !seen[n] {
			t.Errorf("point %s is marked but missing from CrashPoints()", n)
		}
	}
	t.Logf("%d points, marked at %d places", len(CrashPoints()), sum(marked))
}

// parseSources parses the module's Go files under root, tests and
// testdata left out.
func parseSources(t *testing.T, root string) map[string]*ast.File {
	t.Helper()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		files[path] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// constKey is a constant by its package's folder and identifier.
type constKey struct{ dir, ident string }

// pointConsts finds every constant declared as a crash point's name: of
// type Name in the crashpoint package, crashpoint.Name elsewhere.
func pointConsts(files map[string]*ast.File) map[constKey]crashpoint.Name {
	out := map[constKey]crashpoint.Name{}
	for path, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if !isPointType(vs.Type, f.Name.Name) {
					continue
				}
				for i, id := range vs.Names {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						out[constKey{filepath.Dir(path), id.Name}] = crashpoint.Name(strings.Trim(lit.Value, `"`))
					}
				}
			}
		}
	}
	return out
}

func isPointType(e ast.Expr, pkg string) bool {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		return isIdent(sel.X, "crashpoint") && sel.Sel.Name == "Name"
	}
	return pkg == "crashpoint" && isIdent(e, "Name")
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func sum(m map[crashpoint.Name]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
