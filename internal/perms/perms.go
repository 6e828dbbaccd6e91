// Package perms derives the cloud permissions a package needs from the
// interfaces it calls its cloud through, so that a deployment's policy can
// be checked against what the code can call rather than against a list
// kept by hand beside it.
package perms

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// AWS returns the IAM actions of the AWS SDK clients a package uses: one
// "<service>:<Method>" per method of each interface in apis (keyed by the
// IAM service prefix, e.g. "ec2"), whose methods are named after API
// operations as the SDK's are, plus implied: actions that AWS authorizes
// besides the operation itself (tagging on create, iam:PassRole). Sorted,
// without duplicates.
func AWS(apis map[string]reflect.Type, implied ...string) []string {
	out := slices.Clone(implied)
	for service, t := range apis {
		if t.Kind() != reflect.Interface {
			panic("perms.AWS: " + t.String() + " is not an interface")
		}
		for m := range t.Methods() {
			out = append(out, service+":"+m.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Methods returns the method names of the interface t, sorted: the calls a
// package can make through it.
func Methods(t reflect.Type) []string {
	var out []string
	for m := range t.Methods() {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// Uncalled returns the methods of the interface t that no non-test Go file
// in dir calls: permissions a package would be granted for nothing. A call
// is any selector call x.Method(...) with a method name of t, which is
// enough for interfaces whose names are cloud operations.
func Uncalled(dir string, t reflect.Type) ([]string, error) {
	called := map[string]bool{}
	err := VisitCalls(dir, func(sel *ast.SelectorExpr) { called[sel.Sel.Name] = true })
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range Methods(t) {
		if !called[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

// VisitCalls calls visit with the selector of every method or qualified
// function call (x.F(...)) in the non-test Go files of dir: what a package
// can call, read from its source.
func VisitCalls(dir string, visit func(sel *ast.SelectorExpr)) error {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("perms: %w", err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					visit(sel)
				}
			}
			return true
		})
	}
	return nil
}

// CheckCalled is Uncalled for several interfaces: an error naming every
// method no non-test file in dir calls.
func CheckCalled(dir string, apis ...reflect.Type) error {
	var problems []string
	for _, t := range apis {
		unused, err := Uncalled(dir, t)
		if err != nil {
			return err
		}
		if len(unused) > 0 {
			problems = append(problems, fmt.Sprintf("%s lists operations nothing calls (permissions granted for nothing): %s", t, strings.Join(unused, ", ")))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
