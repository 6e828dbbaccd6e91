package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEveryCapabilityIsExercised: each optional interface providers/
// provider.go declares is one the suite knows (and so checks of every
// backend), and the suite knows no other.
func TestEveryCapabilityIsExercised(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../provider.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []Capability
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.Name != "Provider" {
				declared = append(declared, Capability(ts.Name.Name))
			}
		}
	}
	known := Capabilities()
	for _, d := range declared {
		if !slices.Contains(known, d) {
			t.Errorf("provider.go declares %s, which the contract suite does not exercise: add it to capabilityList", d)
		}
	}
	for _, k := range known {
		if !slices.Contains(declared, k) {
			t.Errorf("the suite exercises %s, which provider.go does not declare", k)
		}
	}
}

// TestCapabilitiesAreDeclaredInProviders: outside providers/, the
// module asserts a provider only to interfaces of package providers (or
// to a backend's own type, where it was made), so
// that no package declares a provider capability of its own that the
// contract suite would not exercise.
func TestCapabilitiesAreDeclaredInProviders(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			if rel, _ := filepath.Rel(root, path); rel == "providers" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ta, ok := n.(*ast.TypeAssertExpr)
			if !ok || ta.Type == nil || !isProviderValue(ta.X) {
				return true
			}
			checked++
			if _, concrete := ta.Type.(*ast.StarExpr); concrete {
				return true // the composition root knows its backend
			}
			if sel, ok := ta.Type.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "providers" {
					return true
				}
			}
			t.Errorf("%s: a provider is asserted to %s, not an interface of providers/provider.go: declare the capability there (the contract suite then exercises it)",
				fset.Position(ta.Pos()), types(ta.Type))
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("found no type assertion on a provider anywhere: the walk is looking in the wrong place")
	}
}

// isProviderValue reports expressions named provider: c.provider, g.provider, provider.
func isProviderValue(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name == "provider"
	case *ast.Ident:
		return x.Name == "provider"
	}
	return false
}

func types(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return types(x.X) + "." + x.Sel.Name
	case *ast.InterfaceType:
		return "an interface literal"
	}
	return "a type"
}
