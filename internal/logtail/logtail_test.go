package logtail

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.log")
	if err := os.WriteFile(path, []byte("first line\nsecond\nthird\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		max  int64
		text string
		cut  bool
	}{
		{1 << 20, "first line\nsecond\nthird\n", false},
		{10, "third\n", true}, // from the next line start, never half a line
		{0, "", true},
	}
	for _, c := range cases {
		text, cut := ReadEnd(path, c.max)
		if text != c.text || cut != c.cut {
			t.Errorf("ReadEnd(%d) = %q %v, want %q %v", c.max, text, cut, c.text, c.cut)
		}
	}
	if text, cut := ReadEnd(filepath.Join(t.TempDir(), "none"), 10); text != "" || cut {
		t.Errorf("a missing file: %q %v", text, cut)
	}
}

func TestLastLines(t *testing.T) {
	text := strings.Join([]string{"a", "b", "c"}, "\n") + "\n"
	cases := []struct {
		n    int
		want []string
	}{{0, []string{"a", "b", "c"}}, {2, []string{"b", "c"}}, {5, []string{"a", "b", "c"}}}
	for _, c := range cases {
		if got := LastLines(text, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("LastLines(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}
