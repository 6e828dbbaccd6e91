package wheel

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseFilename(t *testing.T) {
	cases := []struct {
		fn      string
		want    Filename
		wantErr string
	}{
		{fn: "six-1.16.0-py2.py3-none-any.whl", want: Filename{Name: "six", Version: "1.16.0",
			Tags: []Tag{{"py2", "none", "any"}, {"py3", "none", "any"}}}},
		{fn: "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", want: Filename{Name: "numpy", Version: "1.26.4",
			Tags: []Tag{{"cp311", "cp311", "manylinux_2_17_x86_64"}, {"cp311", "cp311", "manylinux2014_x86_64"}}}},
		{fn: "pkg-2.0-1build-cp38-abi3-win_amd64.whl", want: Filename{Name: "pkg", Version: "2.0", Build: "1build",
			Tags: []Tag{{"cp38", "abi3", "win_amd64"}}}},
		{fn: "Foo_Bar-1.0rc1.post2.dev3+local.1-PY3-None-Any.whl", want: Filename{Name: "Foo_Bar", Version: "1.0rc1.post2.dev3+local.1",
			Tags: []Tag{{"py3", "none", "any"}}}},
		{fn: "a-1!2.0-py3.py3-none-any.whl", want: Filename{Name: "a", Version: "1!2.0", Tags: []Tag{{"py3", "none", "any"}}}},
		{fn: "six-1.16.0.tar.gz", wantErr: "no .whl suffix"},
		{fn: "dir/six-1.16.0-py3-none-any.whl", wantErr: "no directory part"},
		{fn: "six-1.16.0-py3-any.whl", wantErr: "name-version(-build)?"},
		{fn: "a-b-c-1.0-py3-none-any.whl", wantErr: "name-version(-build)?"},
		{fn: "six-1.16.0-x-y-py3-none-any.whl", wantErr: "name-version(-build)?"},
		{fn: "_six-1.0-py3-none-any.whl", wantErr: "invalid project name"},
		{fn: "six-one-py3-none-any.whl", wantErr: `invalid version "one"`},
		{fn: "six-1.0-build-py3-none-any.whl", wantErr: "invalid build tag"},
		{fn: "six-1.0-py3..py2-none-any.whl", wantErr: "invalid tag"},
		{fn: "six-1.0-py3-none-any$.whl", wantErr: "invalid tag"},
	}
	for _, c := range cases {
		t.Run(c.fn, func(t *testing.T) {
			got, err := ParseFilename(c.fn)
			if c.wantErr != "" {
				if !errors.Is(err, ErrBadWheel) || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), c.fn) {
					t.Errorf("err = %v, want ErrBadWheel naming the file and %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestChoose(t *testing.T) {
	x86 := Target{Python: "3.11", Arch: "x86_64", Glibc: "2.36"}
	old := Target{Python: "3.11", Arch: "x86_64", Glibc: "2.17"}
	noGlibc := Target{Python: "3.11", Arch: "x86_64"}
	arm := Target{Python: "3.11", Arch: "aarch64", Glibc: "2.36"}
	const (
		ml217   = "fast-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
		ml228   = "fast-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
		ml238   = "fast-1.0-cp311-cp311-manylinux_2_38_x86_64.whl"
		arm228  = "fast-1.0-cp311-cp311-manylinux_2_28_aarch64.whl"
		abi3    = "fast-1.0-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
		pure    = "fast-1.0-py3-none-any.whl"
		sdist   = "fast-1.0.tar.gz"
		cp312   = "fast-1.0-cp312-cp312-manylinux_2_17_x86_64.whl"
		win     = "fast-1.0-cp311-cp311-win_amd64.whl"
		mac     = "fast-1.0-cp311-cp311-macosx_11_0_arm64.whl"
		musl    = "fast-1.0-cp311-cp311-musllinux_1_1_x86_64.whl"
		linux   = "fast-1.0-cp311-cp311-linux_x86_64.whl"
		py2     = "fast-1.0-py2-none-any.whl"
		pypy    = "fast-1.0-pp310-pypy310_pp73-manylinux_2_17_x86_64.whl"
		cp310   = "fast-1.0-cp310-cp310-manylinux_2_17_x86_64.whl"
		abi3any = "fast-1.0-cp38-abi3-any.whl"
		py312   = "fast-1.0-py312-none-any.whl"
		cpNone  = "fast-1.0-cp311-none-any.whl"
		py3ml   = "fast-1.0-py3-none-manylinux_2_17_x86_64.whl"
		abi3new = "fast-1.0-cp311-abi3-manylinux_2_17_x86_64.whl"
		abi3old = "fast-1.0-cp32-abi3-manylinux_2_17_x86_64.whl"
		build1  = "fast-1.0-1-py3-none-any.whl"
		build2  = "fast-1.0-2-py3-none-any.whl"
		debug   = "fast-1.0-cp311-cp311d-manylinux_2_17_x86_64.whl"
	)
	cases := []struct {
		name  string
		t     Target
		files []string
		best  int
		why   []string
	}{
		{"newest fitting manylinux", x86, []string{ml217, ml228, ml238, pure, sdist}, 1,
			[]string{"", "", "needs glibc 2.38, the base has 2.36", "", "a source distribution"}},
		{"older glibc picks the older manylinux", old, []string{ml217, ml228, ml238}, 0,
			[]string{"", "needs glibc 2.28, the base has 2.17", "needs glibc 2.38, the base has 2.17"}},
		{"no glibc known: only pure", noGlibc, []string{ml217, ml228, pure}, 2,
			[]string{"needs glibc 2.17, the base has no glibc known", "needs glibc 2.28, the base has no glibc known", ""}},
		{"no glibc known and no pure wheel: none", noGlibc, []string{ml217, abi3}, -1,
			[]string{"needs glibc 2.17, the base has no glibc known", "needs glibc 2.17, the base has no glibc known"}},
		{"cp311-cp311 before abi3 before pure", x86, []string{pure, abi3, ml217}, 2, []string{"", "", ""}},
		{"abi3 before pure", x86, []string{pure, abi3}, 1, []string{"", ""}},
		{"cp311-abi3 before cp32-abi3", x86, []string{abi3old, abi3new}, 1, []string{"", ""}},
		{"cp38-abi3 before cp32-abi3", x86, []string{abi3old, abi3}, 1, []string{"", ""}},
		{"abi3 at an older glibc before cp311-none", x86, []string{"fast-1.0-cp311-none-manylinux_2_28_x86_64.whl", "fast-1.0-cp311-abi3-manylinux_2_17_x86_64.whl"}, 1, []string{"", ""}},
		{"platform-specific py3 before py3-none-any", x86, []string{pure, py3ml}, 1, []string{"", ""}},
		{"cp311-none-any before py3-none-any", x86, []string{pure, cpNone}, 1, []string{"", ""}},
		{"higher build tag wins a tie", x86, []string{build1, build2, pure}, 1, []string{"", "", ""}},
		{"aarch64 target", arm, []string{ml228, arm228}, 1, []string{"for x86_64", ""}},
		{"x86_64 target refuses aarch64", x86, []string{arm228}, -1, []string{"for aarch64"}},
		{"python version mismatch", x86, []string{cp312, cp310, py312, py2}, -1,
			[]string{"for CPython 3.12", "for CPython 3.10", "for Python 3.12", "for Python 2"}},
		{"other platforms", x86, []string{win, mac, musl, linux, pypy}, -1,
			[]string{"for Windows", "for macOS", "for musl libc (musllinux)", "for linux_x86_64, not manylinux (built for one machine)", "for PyPy"}},
		{"musllinux refused with glibc known", x86, []string{musl, pure}, 1, []string{"for musl libc (musllinux)", ""}},
		{"abi3 with platform any is not installable", x86, []string{abi3any}, -1, []string{"for platform any with ABI abi3 (pip does not install this)"}},
		{"debug ABI", x86, []string{debug}, -1, []string{"for ABI cp311d"}},
		{"not wheels", x86, []string{"fast-1.0.zip", "fast-1.0-py3.11.egg", "fast-1.0-py3-none.whl", "README"}, -1,
			[]string{"a source distribution", "an egg, not a wheel", "not a valid wheel file name", "not a wheel"}},
		{"closest reason across compressed tags", old, []string{"fast-1.0-cp311-cp311-manylinux_2_28_x86_64.manylinux_2_28_aarch64.whl"}, -1,
			[]string{"needs glibc 2.28, the base has 2.17"}},
		{"bad target", Target{Python: "2.7", Arch: "x86_64"}, []string{pure}, -1, []string{`the target Python "2.7" is not a CPython 3 version`}},
		{"empty list", x86, nil, -1, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			best, why := Choose(c.t, c.files)
			if best != c.best || !reflect.DeepEqual(why, c.why) {
				t.Errorf("Choose = %d %q, want %d %q", best, why, c.best, c.why)
			}
		})
	}
}

// The priority order matches pip's (packaging.tags.sys_tags) for CPython 3.11
// on manylinux x86_64 with glibc 2.36, checked on a sample of its list.
func TestChooseOrderMatchesPip(t *testing.T) {
	// In pip's order, best first.
	order := []string{
		"cp311-cp311-manylinux_2_36_x86_64", "cp311-cp311-manylinux_2_5_x86_64", "cp311-cp311-manylinux1_x86_64",
		"cp311-abi3-manylinux_2_36_x86_64", "cp311-abi3-manylinux1_x86_64",
		"cp311-none-manylinux_2_36_x86_64",
		"cp310-abi3-manylinux_2_36_x86_64", "cp310-abi3-manylinux_2_17_x86_64", "cp32-abi3-manylinux_2_36_x86_64",
		"py311-none-manylinux_2_36_x86_64", "py3-none-manylinux_2_36_x86_64", "py310-none-manylinux_2_36_x86_64", "py30-none-manylinux_2_5_x86_64",
		"cp311-none-any",
		"py311-none-any", "py3-none-any", "py310-none-any", "py30-none-any",
	}
	tg := Target{Python: "3.11", Arch: "x86_64", Glibc: "2.36"}
	for i := 0; i+1 < len(order); i++ {
		a, b := "x-1-"+order[i]+".whl", "x-1-"+order[i+1]+".whl"
		if best, why := Choose(tg, []string{b, a}); best != 1 {
			t.Errorf("%s should beat %s: got %d %q", order[i], order[i+1], best, why)
		}
	}
}
