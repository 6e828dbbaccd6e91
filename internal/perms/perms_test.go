package perms

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type fakeAPI interface {
	RunInstances(context.Context) error
	DescribeInstances(context.Context) error
}

type otherAPI interface {
	PutParameter(context.Context) error
}

func TestAWS(t *testing.T) {
	got := AWS(map[string]reflect.Type{"ec2": reflect.TypeFor[fakeAPI](), "ssm": reflect.TypeFor[otherAPI]()}, "iam:PassRole", "ec2:RunInstances")
	want := []string{"ec2:DescribeInstances", "ec2:RunInstances", "iam:PassRole", "ssm:PutParameter"}
	if !slices.Equal(got, want) {
		t.Errorf("AWS = %v, want %v", got, want)
	}
}

func TestUncalled(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{"both called", "package x\nfunc f(p struct{ c fakeAPI }) { p.c.RunInstances(nil); p.c.DescribeInstances(nil) }\n", nil},
		{"one called", "package x\nfunc f(c fakeAPI) { c.RunInstances(nil) }\n", []string{"DescribeInstances"}},
		{"named, not called", "package x\n// DescribeInstances RunInstances\nvar s = \"RunInstances\"\n", []string{"DescribeInstances", "RunInstances"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			// Test files do not count: a call there is not a permission used.
			if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package x\nfunc g(c fakeAPI) { c.DescribeInstances(nil); c.RunInstances(nil) }\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Uncalled(dir, reflect.TypeFor[fakeAPI]())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("Uncalled = %v, want %v", got, c.want)
			}
		})
	}
	if _, err := Uncalled(writeBad(t), reflect.TypeFor[fakeAPI]()); err == nil {
		t.Error("a file that does not parse must be an error")
	}
}

func writeBad(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.go"), []byte("package x\nfunc {"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckCalled(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte("package x\nfunc f(c fakeAPI, o otherAPI) { c.RunInstances(nil); o.PutParameter(nil) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckCalled(dir, reflect.TypeFor[otherAPI]()); err != nil {
		t.Errorf("all called: %v", err)
	}
	err := CheckCalled(dir, reflect.TypeFor[fakeAPI](), reflect.TypeFor[otherAPI]())
	if err == nil || !strings.Contains(err.Error(), "fakeAPI lists operations nothing calls (permissions granted for nothing): DescribeInstances") {
		t.Errorf("CheckCalled = %v", err)
	}
}
