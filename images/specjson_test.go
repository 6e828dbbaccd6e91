package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// specWith is a spec document with n packages named p0, p1, ..., n
// channels and n code parts.
func specWith(packages, channels, code int) string {
	var b strings.Builder
	b.WriteString(`{"python":"3.12","platform":"linux/amd64","packages":[`)
	for i := range packages {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"p%d","version":"1.0"}`, i)
	}
	b.WriteString(`],"channels":[`)
	for i := range channels {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"c%d"`, i)
	}
	b.WriteString(`],"code":[`)
	for i := range code {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"m%d","digest":"%s"}`, i, DigestOf(nil))
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestSpecJSONCaps: a spec at its caps decodes and normalises; one over a
// cap, or with a string over MaxStringBytes, is refused with an error that
// names the cap, whether it came as JSON or was built in Go.
func TestSpecJSONCaps(t *testing.T) {
	long := strings.Repeat("x", MaxStringBytes+1)
	cases := []struct {
		name string
		doc  string
		want string // "" for none
	}{
		{"at every cap", specWith(MaxPackages, MaxChannels, MaxCodeParts), ""},
		{"a package too many", specWith(MaxPackages+1, 0, 0), "more than 10000 packages, the limit of one spec"},
		{"a channel too many", specWith(0, MaxChannels+1, 0), "more than 100 channels, the limit of one spec"},
		{"a code part too many", specWith(0, 0, MaxCodeParts+1), "more than 1024 code, the limit of one spec"},
		{"an empty package", `{"packages":[{"version":"1"}]}`, `a package has an empty name (version "1")`},
		{"a long name", `{"packages":[{"name":"` + long + `","version":"1"}]}`, "a package name is 1025 bytes long, over the limit of 1024"},
		{"a long build", `{"packages":[{"name":"a","version":"1","build":"` + long + `"}]}`, "a conda build is 1025 bytes long"},
		{"a long channel", `{"channels":["` + long + `"]}`, "channels[0] is 1025 bytes long"},
		{"a long digest", `{"code":[{"name":"m","digest":"` + long + `"}]}`, "a code part digest is 1025 bytes long"},
		{"a long python", `{"Python":"` + long + `"}`, "Python is 1025 bytes long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s Spec
			err := json.Unmarshal([]byte(c.doc), &s)
			if c.want == "" {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if _, err := s.Normalize(); err != nil {
					t.Fatalf("normalize: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("decode: %v, want ErrInvalidSpec with %q", err, c.want)
			}
		})
	}
	// The same caps hold for a spec built in Go.
	over := Spec{Python: "3.12", Platform: PlatformAMD64, Packages: make([]Package, MaxPackages+1)}
	if _, err := over.Normalize(); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "more than 10000 packages") {
		t.Errorf("Normalize of %d packages: %v, want the cap", len(over.Packages), err)
	}
	longName := Spec{Python: "3.12", Platform: PlatformAMD64, Packages: []Package{{Name: "a", Version: "1", Channel: long}}}
	if _, err := longName.Normalize(); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "a conda channel is 1025 bytes long") {
		t.Errorf("Normalize of a long channel: %v, want the cap", err)
	}
}

// TestSpecJSONAsEncodingJSON: the element-wise decoder reads what
// encoding/json read: keys in any case, unknown keys skipped, null as
// nothing, and a value of the wrong type named by its field.
func TestSpecJSONAsEncodingJSON(t *testing.T) {
	full := Spec{Python: "3.12", Platform: PlatformARM64, GPU: true,
		Packages: []Package{{Name: "dask", Version: "2024.8.0"}, {Name: "python_abi", Version: "3.12", Build: "5_cp312", Channel: "conda-forge", Subdir: "linux-aarch64"}},
		Channels: []string{"conda-forge", "https://example.invalid/ch"},
		Code:     []CodePart{{Name: "proj", Digest: DigestOf([]byte("x"))}},
	}
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var got Spec
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, full) {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, full)
	}

	for _, c := range []struct {
		name, doc string
		want      Spec
	}{
		{"keys in other case, unknown keys", `{"PYTHON":"3.11","x":[[{"y":[1]}]],"Packages":[{"Name":"a","VERSION":"1","z":{}}],"gpu":true}`,
			Spec{Python: "3.11", GPU: true, Packages: []Package{{Name: "a", Version: "1"}}}},
		{"null lists", `{"python":"3.11","packages":null,"channels":null,"code":null}`, Spec{Python: "3.11"}},
		{"empty lists", `{"packages":[],"channels":[],"code":[]}`, Spec{Packages: nil}},
	} {
		var s Spec
		if err := json.Unmarshal([]byte(c.doc), &s); err != nil || !reflect.DeepEqual(s, c.want) {
			t.Errorf("%s: %+v %v, want %+v", c.name, s, err, c.want)
		}
	}
	var s Spec
	if err := json.Unmarshal([]byte(`null`), &s); err != nil || !reflect.DeepEqual(s, Spec{}) {
		t.Errorf("null: %+v %v, want the zero spec", s, err)
	}

	for _, c := range []struct{ doc, field, value string }{
		{`{"python":3.12}`, "python", "number"},
		{`{"gpu":"yes"}`, "gpu", "string"},
		{`{"packages":{}}`, "packages", "object"},
		{`{"packages":[{"name":1}]}`, "packages[0].name", "number"},
		{`{"channels":[true]}`, "channels[0]", "bool"},
		{`[]`, "", "array"},
	} {
		var s Spec
		err := json.Unmarshal([]byte(c.doc), &s)
		var ute *json.UnmarshalTypeError
		if !errors.As(err, &ute) || ute.Field != c.field || ute.Value != c.value {
			t.Errorf("%s: %v, want a type error of field %q, value %s", c.doc, err, c.field, c.value)
		}
	}
}
