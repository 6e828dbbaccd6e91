package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// uploadTestServer is the API with fe behind it on loopback, its upload
// directory a fresh one, counting what it reads of each body.
func uploadTestServer(t *testing.T, fe *fakeEnvs, cfg Config) (*httptest.Server, *testutil.BodyReads, string) {
	t.Helper()
	if cfg.UploadDir == "" {
		cfg.UploadDir = t.TempDir()
	}
	cfg.Version = "test"
	a := auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}, "bob-token-00000000": {Name: "bob"}})
	s := New(cfg, &fakeCore{scaled: map[string]int{}}, a, nil, nil)
	s.SetEnvs(fe)
	h, reads := testutil.CountBodyReads(s)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, reads, cfg.UploadDir
}

// send posts body to the environment route as request id; n is its
// Content-Length (-1: chunked).
func send(t *testing.T, srv *httptest.Server, token, id string, body io.Reader, n int64) (int, string, error) {
	t.Helper()
	return testutil.SendBody(srv.Client(), srv.URL+"/api/v1/envs", token, id, body, n)
}

func mustSend(t *testing.T, srv *httptest.Server, token, id string, body []byte, chunked bool) (int, string) {
	t.Helper()
	n := int64(len(body))
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		n, r = -1, io.MultiReader(r) // hides the length
	}
	status, answer, err := send(t, srv, token, id, r, n)
	if err != nil {
		t.Fatalf("request %s: %v", id, err)
	}
	return status, answer
}

// uploadBody is an environment request whose one code part is size bytes.
func uploadBody(t *testing.T, size int, seed uint64) []byte {
	t.Helper()
	zip := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{byte(seed)}).Read(zip)
	spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Code: []images.CodePart{{Name: "proj", Digest: images.DigestOf(zip)}}}
	b, err := json.Marshal(apitype.EnvRequest{Spec: spec, Code: map[string][]byte{"proj": zip}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUserBodyBudget: one user's request bodies in flight share
// api.max_user_body_mib. A request that would go over it is answered 429
// too_many_uploads, unread when it declares its length and once over when
// it does not; another user is not held up, and the bytes are given back
// when the request in flight ends.
func TestUserBodyBudget(t *testing.T) {
	const size = 1 << 20 // 1.3 MiB on the wire: two fit in 3 MiB, three do not
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			fe := &fakeEnvs{builds: map[string]string{}, maxCode: 8 << 20}
			srv, reads, _ := uploadTestServer(t, fe, Config{MaxUserBodyBytes: 3 << 20})

			// Alice's first two uploads stay in flight, all but their last
			// byte sent.
			var held []*io.PipeWriter
			var answers []chan int
			for i := range 2 {
				id := fmt.Sprintf("held%d", i)
				body := uploadBody(t, size, uint64(i))
				pr, pw := io.Pipe()
				held = append(held, pw)
				n := int64(len(body))
				if chunked {
					n = -1
				}
				ch := make(chan int, 1)
				answers = append(answers, ch)
				go func() {
					status, answer, err := send(t, srv, "alice-token-000000", id, pr, n)
					if err != nil || status != http.StatusAccepted {
						t.Errorf("held upload %s: %d %s %v, want 202", id, status, answer, err)
					}
					ch <- status
				}()
				go func() {
					_, _ = pw.Write(body[:len(body)-1])
				}()
				select {
				case <-reads.Reached(id, int64(len(body)-1)):
				case <-time.After(time.Minute):
					t.Fatalf("the gateway read %d of %d bytes of upload %s in a minute", reads.Read(id), len(body)-1, id)
				}
			}

			over := uploadBody(t, size, 7)
			status, answer := mustSend(t, srv, "alice-token-000000", "over", over, chunked)
			if status != http.StatusTooManyRequests || !strings.Contains(answer, "too_many_uploads") || !strings.Contains(answer, "api.max_user_body_mib") {
				t.Errorf("a third upload over the budget: %d %s, want 429 too_many_uploads naming api.max_user_body_mib", status, answer)
			}
			if n := reads.Read("over"); !chunked && n != 0 {
				t.Errorf("%d bytes read of an upload refused by its declared length, want none", n)
			} else if chunked && n > 1<<20 {
				t.Errorf("%d bytes read of an upload of unknown length refused, want at most the 1 MiB left of the budget", n)
			}

			status, answer = mustSend(t, srv, "bob-token-00000000", "bob", over, chunked)
			if status != http.StatusAccepted {
				t.Errorf("bob's upload while alice's are in flight: %d %s, want 202", status, answer)
			}

			for i, pw := range held {
				body := uploadBody(t, size, uint64(i))
				_, _ = pw.Write(body[len(body)-1:])
				_ = pw.Close()
				<-answers[i]
			}
			status, answer = mustSend(t, srv, "alice-token-000000", "again", over, chunked)
			if status != http.StatusAccepted {
				t.Errorf("the same upload once the others ended: %d %s, want 202", status, answer)
			}
		})
	}
}

// TestBodyOverWholeBudget: a body larger than the whole budget can never
// be sent: 413, unread, rather than a 429 that asks to wait.
func TestBodyOverWholeBudget(t *testing.T) {
	fe := &fakeEnvs{builds: map[string]string{}, maxCode: 8 << 20}
	srv, reads, _ := uploadTestServer(t, fe, Config{MaxUserBodyBytes: 1 << 20})
	status, answer := mustSend(t, srv, "alice-token-000000", "big", uploadBody(t, 1<<20, 1), false)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(answer, "api.max_user_body_mib") || reads.Read("big") != 0 {
		t.Errorf("%d %s, %d bytes read; want 413 naming api.max_user_body_mib, none read", status, answer, reads.Read("big"))
	}
}

// openIn counts this process's descriptors of files in dir (unlinked
// ones too: /proc shows their old path).
func openIn(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("cannot list this process's descriptors: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(p, dir+"/") {
			n++
		}
	}
	return n
}

// streamedUpload writes, without holding it, an environment request whose
// one code part is size pseudo-random bytes; it returns the request's
// length and the part's digest.
func streamedUpload(size int64, seed byte) (io.Reader, int64, string) {
	part := func() io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{seed}), size) }
	h := sha256.New()
	_, _ = io.Copy(h, part())
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	spec, _ := json.Marshal(images.Spec{Python: "3.11", Platform: "linux/amd64", Code: []images.CodePart{{Name: "proj", Digest: digest}}})
	head := `{"spec":` + string(spec) + `,"code":{"proj":"`
	tail := `"}}`
	pr, pw := io.Pipe()
	go func() {
		enc := base64.NewEncoder(base64.StdEncoding, pw)
		_, err := io.Copy(enc, part())
		if err == nil {
			err = enc.Close()
		}
		if err == nil {
			_, err = io.WriteString(pw, tail)
		}
		pw.CloseWithError(err)
	}()
	return io.MultiReader(strings.NewReader(head), pr), int64(len(head)) + (size+2)/3*4 + int64(len(tail)), digest
}

// TestUploadStreamedToDisk: a 32 MiB upload (43 MiB of base64 on the
// wire) is decoded into a file in the upload directory, not memory: the
// whole process allocates a small fraction of it while the request is
// sent, read, checked against its digest and written as the image's code
// layer. The file is unlinked from the start and closed once answered.
func TestUploadStreamedToDisk(t *testing.T) {
	const size = 32 << 20
	var during int
	var layerBytes int64
	fe := &fakeEnvs{builds: map[string]string{}, maxCode: 64 << 20}
	srv, _, dir := uploadTestServer(t, fe, Config{})
	fe.got = func(spec images.Spec, code images.Code) error {
		during = openIn(t, dir)
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Errorf("upload directory while the request is handled: %v %v, want empty (files unlinked)", entries, err)
		}
		// What the builder does with it: checked against the spec's
		// digest, and written as the code layer's tar.
		l, err := images.CodeLayer(spec, code)
		if err != nil {
			return err
		}
		cw := &countWriter{}
		err = l.WriteTar(cw)
		layerBytes = cw.n
		return err
	}
	body, n, _ := streamedUpload(size, 3)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	status, answer, err := send(t, srv, "alice-token-000000", "big", body, n)
	runtime.ReadMemStats(&after)
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("a 32 MiB upload: %d %s %v, want 202", status, answer, err)
	}
	if layerBytes < size {
		t.Errorf("the code layer has %d bytes, want the %d of the code and its tar headers", layerBytes, size)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d MiB upload (%d MiB on the wire): %.1f MiB allocated in all, heap in use %.1f MiB after", size>>20, n>>20, float64(alloc)/(1<<20), float64(after.HeapInuse)/(1<<20))
	if alloc > 8<<20 {
		t.Errorf("%.1f MiB allocated while a %d MiB upload was handled, want under 8 MiB: the body is held in memory", float64(alloc)/(1<<20), size>>20)
	}
	if during != 1 {
		t.Errorf("%d descriptors of the upload directory while the request was handled, want the one of its code part", during)
	}
	if left := openIn(t, dir); left != 0 {
		t.Errorf("%d descriptors of the upload directory left open after the answer, want none", left)
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }

// TestUploadFilesClosedOnEveryPath: whatever ends an upload, once the
// handler returned, no file of it is left in the upload directory or held
// open.
func TestUploadFilesClosedOnEveryPath(t *testing.T) {
	good := uploadBody(t, 2<<20, 5)
	cases := []struct {
		name   string
		fail   error
		body   []byte
		cut    bool // the client goes away half way through
		status int
	}{
		{"built", nil, good, false, http.StatusAccepted},
		{"refused by the service", fmt.Errorf("%w: no", envs.ErrInvalid), good, false, http.StatusUnprocessableEntity},
		{"bad base64 after a good part", nil, []byte(strings.Replace(string(good), `"proj":"`, `"extra":"AAAA","proj":"!`, 1)), false, http.StatusUnprocessableEntity},
		{"truncated", nil, good[:len(good)/2], false, http.StatusBadRequest},
		{"client gone", nil, good, true, 0},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fe := &fakeEnvs{builds: map[string]string{}, maxCode: 8 << 20, fail: c.fail}
			srv, reads, dir := uploadTestServer(t, fe, Config{})
			id := fmt.Sprint(i)
			if c.cut {
				pr, pw := io.Pipe()
				go func() {
					_, _ = pw.Write(c.body[:len(c.body)/2])
					<-reads.Reached(id, int64(len(c.body)/2))
					pw.CloseWithError(io.ErrClosedPipe)
				}()
				if _, _, err := send(t, srv, "alice-token-000000", id, pr, int64(len(c.body))); err == nil {
					t.Error("the request was sent whole, want it cut")
				}
			} else {
				if status, answer := mustSend(t, srv, "alice-token-000000", id, c.body, false); status != c.status {
					t.Errorf("%d %s, want %d", status, answer, c.status)
				}
			}
			select {
			case <-reads.Done(id):
			case <-time.After(time.Minute):
				t.Fatal("the handler did not return in a minute")
			}
			if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
				t.Errorf("upload directory afterwards: %v %v, want empty", entries, err)
			}
			if n := openIn(t, dir); n != 0 {
				t.Errorf("%d descriptors of the upload directory open afterwards, want none", n)
			}
		})
	}
}

// TestEnvRequestWire: the request is read as the JSON decoder of the whole
// EnvRequest read it (what every client sends), with the same answers to
// bad bodies.
func TestEnvRequestWire(t *testing.T) {
	zip := []byte("zip bytes/with?some>binary\x00\xff\xfe")
	spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Code: []images.CodePart{{Name: "proj", Digest: images.DigestOf(zip)}}}
	specJSON, _ := json.Marshal(spec)
	b64 := base64.StdEncoding.EncodeToString(zip)
	cases := []struct {
		name     string
		body     string
		status   int
		contains string
		code     string // the bytes of part proj Ensure gets
	}{
		{"as the CLI sends it", specBody(t, spec, map[string][]byte{"proj": zip}), 202, "", string(zip)},
		{"code first, spaces, unknown keys", ` { "code" : { "proj" : "` + b64 + `" } , "extra": [1, {"a": "}"}], "spec" : ` + string(specJSON) + ` } `, 202, "", string(zip)},
		{"slashes escaped, lines broken", `{"spec":` + string(specJSON) + `,"code":{"proj":"` + strings.ReplaceAll(b64[:8], "/", `\/`) + `\n` + strings.ReplaceAll(b64[8:], "/", `\/`) + `"}}`, 202, "", string(zip)},
		{"Spec and Code in other case", `{"Spec":` + string(specJSON) + `,"Code":{"proj":"` + b64 + `"}}`, 202, "", string(zip)},
		{"code null", `{"spec":` + string(specJSON) + `,"code":null}`, 409, "code_required", ""},
		{"part twice", `{"spec":` + string(specJSON) + `,"code":{"proj":"` + b64 + `","proj":"` + b64 + `"}}`, 422, `code part \"proj\" is given twice`, ""},
		{"part not a string", `{"spec":` + string(specJSON) + `,"code":{"proj":1}}`, 422, "code.proj must be a base64 string", ""},
		{"code not an object", `{"spec":` + string(specJSON) + `,"code":"x"}`, 422, "code must be an object", ""},
		{"bad base64", `{"spec":` + string(specJSON) + `,"code":{"proj":"ab!d"}}`, 422, "code.proj is not valid base64", ""},
		{"base64 cut short", `{"spec":` + string(specJSON) + `,"code":{"proj":"abc"}}`, 422, "not a multiple of 4", ""},
		{"other escapes", `{"spec":` + string(specJSON) + `,"code":{"proj":"\u0041AAA\r\n\/\/\/\/"}}`, 202, "", "\x00\x00\x00\xff\xff\xff"},
		{"an escape that is not base64", `{"spec":` + string(specJSON) + `,"code":{"proj":"AA\"A"}}`, 422, "not valid base64", ""},
		{"a character that is not", `{"spec":` + string(specJSON) + `,"code":{"proj":"AA\u00e9A"}}`, 422, "not valid base64", ""},
		{"a spec field of the wrong type", `{"spec":{"python":3}}`, 422, "spec.python", ""},
		{"not an object", `[1]`, 422, "must be a JSON object", ""},
		{"not JSON", `spec=1`, 400, "not valid JSON", ""},
		{"empty", ``, 400, "request body is empty", ""},
		{"cut short", `{"spec":` + string(specJSON), 400, "not valid JSON", ""},
		{"two parts, each its own", `{"spec":` + string(specJSON) + `,"code":{"other":"AAEC","proj":"` + b64 + `"}}`, 202, "", string(zip)},
		{"too many parts", `{"spec":` + string(specJSON) + `,"code":{` + manyParts(1025) + `}}`, 422, "more than 1024 code parts", ""},
		{"data after the object", `{"spec":` + string(specJSON) + `} {}`, 400, "data after the JSON object", ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got string
			fe := &fakeEnvs{builds: map[string]string{}, got: func(_ images.Spec, code images.Code) error {
				if r := code["other"]; r != nil {
					if b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size())); err != nil || string(b) != "\x00\x01\x02" {
						t.Errorf("part other: %q %v, want its own 3 bytes", b, err)
					}
				}
				if r := code["proj"]; r != nil {
					b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
					got = string(b)
					return err
				}
				return nil
			}}
			srv, _, _ := uploadTestServer(t, fe, Config{})
			status, answer := mustSend(t, srv, "alice-token-000000", fmt.Sprint(i), []byte(c.body), false)
			if status != c.status || !strings.Contains(answer, c.contains) {
				t.Errorf("%d %s, want %d with %q", status, answer, c.status, c.contains)
			}
			if got != c.code {
				t.Errorf("Ensure got code %q, want %q", got, c.code)
			}
		})
	}
}

// manyParts is n code parts, of names p0, p1 and on, JSON object members.
func manyParts(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"p%d":""`, i)
	}
	return strings.Join(parts, ",")
}
