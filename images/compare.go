package images

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// PythonKey is the key Compare uses for the interpreter version.
const PythonKey = "python"

// CheckedPackages returns the keys of the consistency check: the Python
// version and the packages whose versions must agree between a Dask client
// and its cluster, plus cupy and cudf for GPU environments.
func CheckedPackages(gpu bool) []string {
	keys := []string{PythonKey, "dask", "distributed", "cloudpickle", "msgpack", "numpy", "pandas"}
	if gpu {
		keys = append(keys, "cupy", "cudf")
	}
	return keys
}

// aliases are other distribution names under which a key is installed:
// conda's msgpack-python, and pip's CUDA-specific cupy and cudf wheels.
var aliases = map[string][]string{
	"msgpack": {"msgpack-python"},
	"cupy":    {"cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"},
	"cudf":    {"cudf-cu13", "cudf-cu12", "cudf-cu11"},
}

// Mismatch is one key on which a client and an image disagree. An empty
// Client or Image means that side does not have the package.
type Mismatch struct {
	Package string
	Client  string
	Image   string
}

// Compare returns, in the order of keys, the keys whose versions differ
// between the client's and the image's environments ("python" compares the
// major.minor interpreter versions). With keys nil it checks
// CheckedPackages(client.GPU || image.GPU). A package missing on both sides
// is not a mismatch. Names are compared in PEP 503 normal form, and a
// package may be found under a known alias (msgpack-python, cupy-cuda12x,
// cudf-cu12, ...). Versions are compared exactly, after trimming space.
func Compare(client, image Spec, keys []string) []Mismatch {
	if keys == nil {
		keys = CheckedPackages(client.GPU || image.GPU)
	}
	cv, iv := versions(client), versions(image)
	var out []Mismatch
	for _, key := range keys {
		var c, i string
		if strings.EqualFold(strings.TrimSpace(key), PythonKey) {
			c, i = python(client.Python), python(image.Python)
		} else {
			k := NormalizeName(key)
			c, i = lookup(cv, k), lookup(iv, k)
		}
		if c != i {
			out = append(out, Mismatch{Package: key, Client: c, Image: i})
		}
	}
	return out
}

func python(v string) string {
	if n, err := NormalizePython(v); err == nil {
		return n
	}
	return strings.TrimSpace(v)
}

func versions(s Spec) map[string]string {
	m := make(map[string]string, len(s.Packages))
	for _, p := range s.Packages {
		n := NormalizeName(p.Name)
		if _, dup := m[n]; !dup {
			m[n] = strings.TrimSpace(p.Version)
		}
	}
	return m
}

func lookup(m map[string]string, key string) string {
	if v, ok := m[key]; ok {
		return v
	}
	for _, a := range aliases[key] {
		if v, ok := m[a]; ok {
			return v
		}
	}
	return ""
}

// FormatMismatches renders mismatches as an aligned table with a header
// line, "package  client  image", and "(missing)" for an absent package.
// It returns "" when there are none.
func FormatMismatches(ms []Mismatch) string {
	if len(ms) == 0 {
		return ""
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "package\tclient\timage")
	for _, m := range ms {
		fmt.Fprintf(w, "%s\t%s\t%s\n", m.Package, orMissing(m.Client), orMissing(m.Image))
	}
	w.Flush()
	return b.String()
}

func orMissing(v string) string {
	if v == "" {
		return "(missing)"
	}
	return v
}

// ClientVersions keeps, of the versions a client sent (ExpectedVersions:
// "python" and package names, "" for a package it does not have), the
// checked keys it sent, trimmed, with python as major.minor: what
// CompareVersions compares and what members check at start.
func ClientVersions(client map[string]string) map[string]string {
	gpu := client["cupy"] != "" || client["cudf"] != ""
	out := map[string]string{}
	for _, key := range CheckedPackages(gpu) {
		c, sent := client[key]
		if !sent {
			continue
		}
		c = strings.TrimSpace(c)
		if key == PythonKey {
			c = python(c)
		}
		out[key] = c
	}
	return out
}

// CompareVersions is Compare for a client known only by its versions of the
// checked packages (as ClientVersions keeps them), as the CLI sends them
// with a cluster request. Keys the client did not send are not compared.
func CompareVersions(client map[string]string, image Spec) []Mismatch {
	cv := ClientVersions(client)
	gpu := image.GPU || cv["cupy"] != "" || cv["cudf"] != ""
	iv := ExpectedVersions(Spec{Python: image.Python, GPU: gpu, Packages: image.Packages})
	var out []Mismatch
	for _, key := range CheckedPackages(gpu) {
		c, sent := cv[key]
		if sent && c != iv[key] {
			out = append(out, Mismatch{Package: key, Client: c, Image: iv[key]})
		}
	}
	return out
}
