package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// hostileSpec is an environment request whose spec is head, then item
// repeated until the body is about size bytes (none for 0), then tail.
func hostileSpec(head, item, tail string, size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"spec":{"python":"3.12","platform":"linux/amd64",` + head)
	for i := 0; b.Len()+len(item)+len(tail)+2 < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(tail + "}}")
	return b.Bytes()
}

// TestHostileSpecBounded: what a spec costs the gateway to read is bounded
// by a small multiple of its bytes, whatever its shape, and a spec past a
// cap is refused with a 422 that names it. Before specs were decoded
// element by element, a 1 MB list of empty objects cost ~100 MB.
func TestHostileSpecBounded(t *testing.T) {
	const mb = 1_000_000 // under codelessBytes: read before Admit
	long := strings.Repeat("a", mb-200)
	cases := []struct {
		name     string
		body     []byte
		contains string
	}{
		{"many empty packages", hostileSpec(`"packages":[`, `{}`, `]`, mb), "a package has an empty name"},
		{"many nulls as packages", hostileSpec(`"packages":[`, `null`, `]`, mb), "a package has an empty name"},
		{"many tiny packages", hostileSpec(`"packages":[`, `{"name":"a","version":"1"}`, `]`, mb), "more than 10000 packages, the limit of one spec"},
		{"many tiny channels", hostileSpec(`"channels":[`, `"a"`, `]`, mb), "more than 100 channels, the limit of one spec"},
		{"many empty code parts", hostileSpec(`"code":[`, `{}`, `]`, mb), "more than 1024 code, the limit of one spec"},
		{"nested junk in each package", hostileSpec(`"packages":[`, `{"name":"a","version":"1","x":[[[[[[[[{}]]]]]]]]}`, `]`, mb), "more than 10000 packages"},
		{"deeply nested junk", hostileSpec(`"junk":`+strings.Repeat("[", 9000), `[]`, strings.Repeat("]", 9000)+`,"packages":[{}]`, mb), "a package has an empty name"},
		{"a huge package name", hostileSpec(`"packages":[{"name":"`+long+`","version":"1"}]`, ``, ``, 0), "a package name is 999800 bytes long, over the limit of 1024"},
		{"a huge channel", hostileSpec(`"channels":["`+long+`"]`, ``, ``, 0), "channels[0] is 999800 bytes long, over the limit of 1024"},
		{"a huge python version", hostileSpec(`"gpu":false`, ``, `,"python":"`+long+`"`, 0), "python is 999800 bytes long"},
		{"over the spec's byte bound", hostileSpec(`"packages":[`, `{}`, `]`, 4_100_000), "the spec (or another field than code) is over 2 MiB"},
	}
	fe := &fakeEnvs{builds: map[string]string{}, maxCode: 8 << 20}
	srv, _, _ := uploadTestServer(t, fe, Config{})
	h := srv.Config.Handler
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/api/v1/envs", bytes.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer alice-token-000000")
			req.Header.Set("X-Test-Request", c.name)
			rec := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			h.ServeHTTP(rec, req)
			runtime.ReadMemStats(&after)
			if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), c.contains) {
				t.Errorf("%d %s, want 422 with %q", rec.Code, rec.Body.String(), c.contains)
			}
			alloc, bound := after.TotalAlloc-before.TotalAlloc, uint64(16*len(c.body))
			if alloc > bound {
				t.Errorf("reading a %d-byte body allocated %d bytes (%.1fx), over 16x its size", len(c.body), alloc, float64(alloc)/float64(len(c.body)))
			}
			t.Logf("%d-byte body: %d bytes allocated (%.1fx)", len(c.body), alloc, float64(alloc)/float64(len(c.body)))
		})
	}
}
