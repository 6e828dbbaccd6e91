package crashpoint

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec    string
		target  Name
		nth     int64
		wantErr string
	}{
		{spec: ""},
		{spec: "core.create.admitted", target: CoreCreateAdmitted, nth: 1},
		{spec: "core.create.admitted@3", target: CoreCreateAdmitted, nth: 3},
		{spec: "@7", nth: 7},
		{spec: "@0", wantErr: "whole number from 1"},
		{spec: "@-2", wantErr: "whole number from 1"},
		{spec: "core.create.admitted@x", wantErr: "whole number from 1"},
		{spec: "nope", wantErr: "no such point"},
		{spec: "nope@2", wantErr: "no such point"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			p, err := Parse(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), EnvVar) {
					t.Fatalf("Parse(%q) = %v; want an error naming %s and saying %q", tt.spec, err, EnvVar, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.spec == "" {
				if p != nil {
					t.Fatalf("Parse(\"\") = %+v; want nil (no crashes)", p)
				}
				return
			}
			if p.target != tt.target || p.nth != tt.nth {
				t.Errorf("Parse(%q) = target %q, nth %d; want %q, %d", tt.spec, p.target, p.nth, tt.target, tt.nth)
			}
		})
	}
}

func TestHit(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		hits    []Name
		crashes int   // how many times the crash ran
		at      int64 // the hit count after the run
	}{
		{"named, first hit", "core.start.recorded", []Name{CoreCreateAdmitted, CoreStartRecorded, CoreStartLaunched}, 1, 1},
		{"named, third hit", "core.workers.launched@3", []Name{CoreWorkerLaunched, CoreWorkersNamed, CoreWorkerLaunched, CoreWorkerLaunched}, 1, 3},
		{"named, never reached", "core.stop.recorded", []Name{CoreCreateAdmitted, CoreStartRecorded}, 0, 0},
		{"any name, second", "@2", []Name{CoreCreateAdmitted, LocalSchedulerSpawned, CoreStartRecorded}, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			crashes := 0
			p.WithCrash(&out, func() { crashes++ })
			ctx := With(context.Background(), p)
			for _, n := range tt.hits {
				Hit(ctx, n)
			}
			if crashes != tt.crashes || p.Hits() != tt.at {
				t.Errorf("crashes %d, hits %d; want %d, %d", crashes, p.Hits(), tt.crashes, tt.at)
			}
			if (crashes > 0) != strings.HasPrefix(out.String(), Marker) {
				t.Errorf("marker line %q with %d crashes", out.String(), crashes)
			}
		})
	}
	// Without points nothing happens, and a nil *Points is safe.
	Hit(context.Background(), CoreCreateAdmitted)
	if With(context.Background(), nil) != context.Background() || (*Points)(nil).Hits() != 0 {
		t.Error("nil points changed the context or counted hits")
	}
}

// TestCrashIsSIGKILL runs a process that hits its point: it must die of
// SIGKILL right there, having said where, and run nothing after it.
func TestCrashIsSIGKILL(t *testing.T) {
	if os.Getenv("CRASHPOINT_TEST_CHILD") == "1" {
		p, err := Parse(os.Getenv(EnvVar))
		if err != nil {
			os.Exit(3)
		}
		ctx := With(context.Background(), p)
		Hit(ctx, CoreCreateAdmitted)
		Hit(ctx, CoreStartRecorded)
		os.Stdout.WriteString("after the point\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashIsSIGKILL$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_TEST_CHILD=1", EnvVar+"="+string(CoreStartRecorded))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v; want it killed", err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v; want SIGKILL", ee)
	}
	if want := Marker + string(CoreStartRecorded) + " (hit 1)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
	if strings.Contains(stdout.String(), "after the point") {
		t.Error("code after the crash point ran")
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9]+\.[a-z0-9]+\.[a-z0-9-]+$`)

// TestEveryPointIsMarked: every listed point is marked by some code
// outside tests (a test waiting for a point no code reaches would wait in
// vain), every Hit names a listed point, and names are unique.
func TestEveryPointIsMarked(t *testing.T) {
	seen := map[Name]bool{}
	for _, n := range All() {
		if seen[n] {
			t.Errorf("point %s listed twice", n)
		}
		seen[n] = true
		if !nameRE.MatchString(string(n)) {
			t.Errorf("point %q is not named layer.operation.what", n)
		}
	}
	consts := constNames(t)
	marked := map[Name]int{}
	root := filepath.Join("..", "..")
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
	for _, n := range All() {
		if marked[n] == 0 {
			t.Errorf("point %s is listed but no code marks it", n)
		}
	}
	for n := range marked {
		if !seen[n] {
			t.Errorf("point %s is marked but missing from All()", n)
		}
	}
	t.Logf("%d points, marked at %d places", len(All()), sum(marked))
}

// constNames maps the package's Name constants' identifiers to values.
func constNames(t *testing.T) map[string]Name {
	t.Helper()
	out := map[string]Name{}
	files, _ := filepath.Glob("names*.go")
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
						out[id.Name] = Name(strings.Trim(lit.Value, `"`))
					}
				}
			}
		}
	}
	if len(out) != len(All()) {
		t.Fatalf("%d point constants, %d points listed in All(): list every constant", len(out), len(All()))
	}
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func sum(m map[Name]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
