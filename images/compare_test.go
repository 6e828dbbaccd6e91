package images

import (
	"reflect"
	"testing"
)

func TestCompare(t *testing.T) {
	client := sampleSpec()
	tests := []struct {
		name  string
		image func(*Spec)
		keys  []string
		want  []Mismatch
	}{
		{"same environment", func(*Spec) {}, nil, nil},
		{"python patch versions are ignored", func(s *Spec) { s.Python = "3.12.1" }, nil, nil},
		{"python and dask differ", func(s *Spec) {
			s.Python = "3.11"
			s.Packages[1].Version = "2024.7.1"
		}, nil, []Mismatch{{"python", "3.12", "3.11"}, {"dask", "2024.8.0", "2024.7.1"}}},
		{"missing in the image", func(s *Spec) { s.Packages = s.Packages[1:] }, nil, []Mismatch{{"pandas", "2.2.2", ""}}},
		{"conda msgpack-python is msgpack", func(s *Spec) { s.Packages[5] = Package{Name: "msgpack-python", Version: "1.0.8"} }, nil, nil},
		{"GPU adds cupy and cudf, found under their pip names", func(s *Spec) {
			s.GPU = true
			s.Packages = append(s.Packages, Package{Name: "cupy-cuda12x", Version: "13.2.0"}, Package{Name: "cudf-cu12", Version: "24.6.0"})
		}, nil, []Mismatch{{"cupy", "", "13.2.0"}, {"cudf", "", "24.6.0"}}},
		{"explicit keys, normalised names", func(s *Spec) {
			s.Packages[6] = Package{Name: "Typing.Extensions", Version: "4.11.0"}
		}, []string{"typing_extensions", "toolz"}, []Mismatch{{"typing_extensions", "4.12.2", "4.11.0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			image := sampleSpec()
			tt.image(&image)
			if got := Compare(client, image, tt.keys); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Compare() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFormatMismatches(t *testing.T) {
	if got := FormatMismatches(nil); got != "" {
		t.Errorf("FormatMismatches(nil) = %q, want empty", got)
	}
	got := FormatMismatches([]Mismatch{
		{"python", "3.12", "3.11"},
		{"distributed", "2024.8.0", "2024.7.1"},
		{"cupy", "", "13.2.0"},
	})
	want := "" +
		"package      client     image\n" +
		"python       3.12       3.11\n" +
		"distributed  2024.8.0   2024.7.1\n" +
		"cupy         (missing)  13.2.0\n"
	if got != want {
		t.Errorf("FormatMismatches() =\n%s\nwant\n%s", got, want)
	}
}

func TestClientVersions(t *testing.T) {
	cases := []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{"python as major.minor, space trimmed", map[string]string{"python": "3.12.4", "numpy": " 2.1.0 "}, map[string]string{"python": "3.12", "numpy": "2.1.0"}},
		{"unchecked keys are dropped", map[string]string{"dask": "2024.8.0", "requests": "2.0", "cupy": ""}, map[string]string{"dask": "2024.8.0"}},
		{"GPU packages kept when the client has one", map[string]string{"cupy": "13.0.0", "cudf": ""}, map[string]string{"cupy": "13.0.0", "cudf": ""}},
		{"a package the client lacks stays empty", map[string]string{"pandas": ""}, map[string]string{"pandas": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ClientVersions(c.in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("ClientVersions(%v) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}
