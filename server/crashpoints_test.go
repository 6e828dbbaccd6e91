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
// vain), every Hit names a listed point, and names are unique.
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
	consts := constNames(t)
	marked := map[crashpoint.Name]int{}
	root := ".."
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
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if fn, ok := call.Fun.(*ast.SelectorExpr); !ok || fn.Sel.Name != "Hit" || !isIdent(fn.X, "crashpoint") {
				return true
			}
			arg, ok := call.Args[1].(*ast.SelectorExpr)
			if !ok || !isIdent(arg.X, "crashpoint") {
				t.Errorf("%s: crashpoint.Hit with %T; name a listed point constant", path, call.Args[1])
				return true
			}
			name, ok := consts[arg.Sel.Name]
			if !ok {
				t.Errorf("%s: crashpoint.%s is not a point", path, arg.Sel.Name)
				return true
			}
			marked[name]++
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
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

// constNames maps internal/crashpoint's Name constants' identifiers to
// values.
func constNames(t *testing.T) map[string]crashpoint.Name {
	t.Helper()
	out := map[string]crashpoint.Name{}
	files, _ := filepath.Glob(filepath.Join("..", "internal", "crashpoint", "names*.go"))
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						out[id.Name] = crashpoint.Name(strings.Trim(lit.Value, `"`))
					}
				}
			}
		}
	}
	if len(out) != len(CrashPoints()) {
		t.Fatalf("%d point constants, %d points listed by CrashPoints(): list every constant in Core() or a backend's registration", len(out), len(CrashPoints()))
	}
	return out
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
