package sni

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

const testServerName = "daskgateway-abc123"

// recordConn captures what a tls.Client writes before it first waits for the
// server, which is exactly the ClientHello flight.
type recordConn struct {
	w       bytes.Buffer
	didRead bool
}

func (c *recordConn) Read([]byte) (int, error) { c.didRead = true; return 0, io.EOF }
func (c *recordConn) Write(p []byte) (int, error) {
	if !c.didRead {
		c.w.Write(p)
	}
	return len(p), nil
}
func (c *recordConn) Close() error                     { return nil }
func (c *recordConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *recordConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *recordConn) SetDeadline(time.Time) error      { return nil }
func (c *recordConn) SetReadDeadline(time.Time) error  { return nil }
func (c *recordConn) SetWriteDeadline(time.Time) error { return nil }

func captureHello(tb testing.TB, cfg *tls.Config) []byte {
	tb.Helper()
	c := &recordConn{}
	if err := tls.Client(c, cfg).Handshake(); err == nil {
		tb.Fatal("handshake unexpectedly succeeded")
	}
	if c.w.Len() == 0 {
		tb.Fatal("tls.Client wrote nothing")
	}
	return bytes.Clone(c.w.Bytes())
}

type realCase struct {
	name     string
	cfg      *tls.Config
	wantName string
	wantALPN []string
}

func realCases() []realCase {
	return []realCase{
		{"default", &tls.Config{ServerName: testServerName, NextProtos: []string{"h2", "http/1.1"}},
			testServerName, []string{"h2", "http/1.1"}},
		{"tls12-only", &tls.Config{ServerName: testServerName, NextProtos: []string{"http/1.1"}, MaxVersion: tls.VersionTLS12},
			testServerName, []string{"http/1.1"}},
		{"tls13-only", &tls.Config{ServerName: testServerName, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13},
			testServerName, []string{"h2"}},
		{"no-alpn", &tls.Config{ServerName: testServerName},
			testServerName, nil},
		{"no-sni", &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}},
			"", []string{"h2"}},
		{"ip-literal-has-no-sni", &tls.Config{ServerName: "10.0.0.1", NextProtos: []string{"h2"}},
			"", []string{"h2"}},
		{"mixed-case", &tls.Config{ServerName: "DaskGateway-ABC123.Example.COM"},
			"daskgateway-abc123.example.com", nil},
		{"custom-alpn", &tls.Config{ServerName: "a_b.example", NextProtos: []string{"dask/1", "h2", "x-custom", "acme-tls/1"}},
			"a_b.example", []string{"dask/1", "h2", "x-custom", "acme-tls/1"}},
	}
}

// recordsToMessage strips record headers, giving the handshake message that
// Parse expects.
func recordsToMessage(tb testing.TB, recs []byte) []byte {
	tb.Helper()
	var msg []byte
	for len(recs) > 0 {
		if len(recs) < 5 || recs[0] != 0x16 {
			tb.Fatalf("unexpected record stream % x", recs[:min(len(recs), 5)])
		}
		n := int(recs[3])<<8 | int(recs[4])
		msg = append(msg, recs[5:5+n]...)
		recs = recs[5+n:]
	}
	return msg
}

// fragment re-splits a handshake message into records whose sizes cycle
// through sizes.
func fragment(msg []byte, sizes ...int) []byte {
	var out []byte
	for i := 0; len(msg) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(msg))
		out = append(out, 0x16, 0x03, 0x01, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

func checkHello(t *testing.T, got Hello, wantName string, wantALPN []string) {
	t.Helper()
	if got.ServerName != wantName {
		t.Errorf("ServerName = %q, want %q", got.ServerName, wantName)
	}
	if !slices.Equal(got.ALPN, wantALPN) || (got.ALPN == nil) != (wantALPN == nil) {
		t.Errorf("ALPN = %q, want %q", got.ALPN, wantALPN)
	}
}

// trailer stands in for whatever the client sends after its hello; Peek must
// leave it unread.
var trailer = []byte{0x17, 0x03, 0x03, 0x00, 0x02, 'h', 'i'}

func TestPeekRealHellos(t *testing.T) {
	readers := []struct {
		name      string
		wrap      func(io.Reader) io.Reader
		readAhead bool // the wrapper itself buffers, so src.Len says nothing about Peek
	}{
		{"bytes", func(r io.Reader) io.Reader { return r }, false},
		{"one-byte", iotest.OneByteReader, false},
		{"half", iotest.HalfReader, false},
		{"data-err", iotest.DataErrReader, true},
	}
	bufs := []struct {
		name string
		buf  func() []byte
	}{
		{"nil", func() []byte { return nil }},
		{"small", func() []byte { return make([]byte, 3, 16) }},
		{"pooled", func() []byte { return make([]byte, 0, 8192) }},
	}
	for _, tc := range realCases() {
		hello := captureHello(t, tc.cfg)
		if tc.name == "no-sni" && bytes.Contains(hello, []byte(testServerName)) {
			t.Fatal("no-sni hello unexpectedly carries a name")
		}
		for _, rd := range readers {
			for _, bf := range bufs {
				t.Run(tc.name+"/"+rd.name+"/"+bf.name, func(t *testing.T) {
					src := bytes.NewReader(slices.Concat(hello, trailer))
					buf := bf.buf()
					got, consumed, err := Peek(rd.wrap(src), buf, 0)
					if err != nil {
						t.Fatalf("Peek: %v", err)
					}
					checkHello(t, got, tc.wantName, tc.wantALPN)
					if !bytes.Equal(consumed, hello) {
						t.Fatalf("consumed %d bytes, want the %d-byte hello", len(consumed), len(hello))
					}
					if !rd.readAhead && src.Len() != len(trailer) {
						t.Fatalf("left %d bytes unread, want %d", src.Len(), len(trailer))
					}
					if cap(buf) >= len(hello) && &consumed[0] != &buf[:1][0] {
						t.Error("consumed does not alias a sufficiently large buf")
					}
				})
			}
		}
	}
}

func TestPeekFragmented(t *testing.T) {
	for _, tc := range realCases() {
		msg := recordsToMessage(t, captureHello(t, tc.cfg))
		check := func(t *testing.T, in []byte, wrap func(io.Reader) io.Reader) {
			src := bytes.NewReader(slices.Concat(in, trailer))
			got, consumed, err := Peek(wrap(src), nil, MaxBytesLimit)
			if err != nil {
				t.Fatalf("Peek: %v", err)
			}
			checkHello(t, got, tc.wantName, tc.wantALPN)
			if !bytes.Equal(consumed, in) {
				t.Fatalf("consumed %d bytes, want %d", len(consumed), len(in))
			}
			if src.Len() != len(trailer) {
				t.Fatalf("left %d bytes unread, want %d", src.Len(), len(trailer))
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			plain := func(r io.Reader) io.Reader { return r }
			for size := 1; size <= 100; size++ {
				check(t, fragment(msg, size), plain)
			}
			check(t, fragment(msg, 1, 2, 3, 100, 7, 4000), plain)
			check(t, fragment(msg, 3), iotest.OneByteReader)
			check(t, fragment(msg, 1, 9), iotest.HalfReader)
		})
	}
}

func TestPeekTruncated(t *testing.T) {
	for _, tc := range realCases()[:2] {
		hello := captureHello(t, tc.cfg)
		frag := fragment(recordsToMessage(t, hello), 50)
		for _, in := range [][]byte{hello, frag} {
			for i := 1; i < len(in); i++ {
				_, consumed, err := Peek(bytes.NewReader(in[:i]), nil, MaxBytesLimit)
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("%s prefix %d: err = %v, want ErrUnexpectedEOF", tc.name, i, err)
				}
				if !bytes.Equal(consumed, in[:i]) {
					t.Fatalf("%s prefix %d: consumed %d bytes", tc.name, i, len(consumed))
				}
			}
		}
		msg := recordsToMessage(t, hello)
		for i := range len(msg) {
			if _, err := Parse(msg[:i]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: Parse of %d-byte prefix: err = %v, want ErrMalformed", tc.name, i, err)
			}
		}
	}
}

// Helpers for synthetic hellos; each mirrors one TLS vector encoding.

func v8(b ...[]byte) []byte {
	c := slices.Concat(b...)
	return append([]byte{byte(len(c))}, c...)
}

func v16(b ...[]byte) []byte {
	c := slices.Concat(b...)
	return append([]byte{byte(len(c) >> 8), byte(len(c))}, c...)
}

func ext(typ uint16, data ...[]byte) []byte {
	return slices.Concat([]byte{byte(typ >> 8), byte(typ)}, v16(data...))
}

func sniExt(names ...string) []byte {
	var entries [][]byte
	for _, n := range names {
		entries = append(entries, []byte{0}, v16([]byte(n)))
	}
	return ext(0, v16(entries...))
}

func alpnExt(protos ...string) []byte {
	var entries [][]byte
	for _, p := range protos {
		entries = append(entries, v8([]byte(p)))
	}
	return ext(16, v16(entries...))
}

type spec struct {
	sessionID []byte
	suites    []byte
	comp      []byte
	exts      [][]byte
	rawExts   []byte // when set, replaces the encoded extensions block
	noExts    bool
}

func (s spec) body() []byte {
	suites, comp := s.suites, s.comp
	if suites == nil {
		suites = []byte{0x13, 0x01, 0xc0, 0x2f}
	}
	if comp == nil {
		comp = []byte{0}
	}
	b := slices.Concat([]byte{3, 3}, make([]byte, 32), v8(s.sessionID), v16(suites), v8(comp))
	switch {
	case s.rawExts != nil:
		return append(b, s.rawExts...)
	case s.noExts:
		return b
	}
	return append(b, v16(s.exts...)...)
}

func handshake(typ byte, body []byte) []byte {
	n := len(body)
	return append([]byte{typ, byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

func (s spec) msg() []byte     { return handshake(1, s.body()) }
func (s spec) records() []byte { return fragment(s.msg(), 1<<14) }

func TestParseSynthetic(t *testing.T) {
	long := strings.Repeat("a", 255)
	tests := []struct {
		name     string
		spec     spec
		wantName string
		wantALPN []string
	}{
		{"no-extensions-block", spec{noExts: true}, "", nil},
		{"empty-extensions-block", spec{}, "", nil},
		{"sni-and-alpn", spec{exts: [][]byte{sniExt("Foo.Example"), alpnExt("h2", "http/1.1")}}, "foo.example", []string{"h2", "http/1.1"}},
		{"alpn-before-sni", spec{exts: [][]byte{alpnExt("dask"), ext(0xfe0d, []byte{1, 2}), sniExt("x")}}, "x", []string{"dask"}},
		{"underscore-and-digits", spec{exts: [][]byte{sniExt("_acme-challenge.0.example")}}, "_acme-challenge.0.example", nil},
		{"max-length-name", spec{exts: [][]byte{sniExt(long)}}, long, nil},
		{"max-session-id", spec{sessionID: make([]byte, 32), exts: [][]byte{sniExt("a")}}, "a", nil},
		{"unknown-name-type-skipped", spec{exts: [][]byte{ext(0, v16([]byte{7}, v16([]byte("??"))))}}, "", nil},
		{"unknown-type-plus-host", spec{exts: [][]byte{ext(0, v16([]byte{7}, v16([]byte("??")), []byte{0}, v16([]byte("ok"))))}}, "ok", nil},
		{"unknown-extensions-ignored", spec{exts: [][]byte{ext(43, []byte{2, 3, 4}), ext(0xffff), sniExt("a")}}, "a", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.spec.msg())
			if got.EarlyData {
				t.Error("EarlyData set for a hello without the extension")
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checkHello(t, got, tt.wantName, tt.wantALPN)

			in := tt.spec.records()
			got, consumed, err := Peek(bytes.NewReader(in), nil, 0)
			if err != nil {
				t.Fatalf("Peek: %v", err)
			}
			checkHello(t, got, tt.wantName, tt.wantALPN)
			if !bytes.Equal(consumed, in) {
				t.Fatal("consumed != input")
			}
		})
	}
}

func TestParseEarlyData(t *testing.T) {
	got, err := Parse(spec{exts: [][]byte{sniExt("daskgateway-c"), ext(42)}}.msg())
	if err != nil {
		t.Fatal(err)
	}
	if !got.EarlyData || got.ServerName != "daskgateway-c" {
		t.Fatalf("got %+v, want early data offered for daskgateway-c", got)
	}
}

func TestPeekErrors(t *testing.T) {
	realHello := captureHello(t, &tls.Config{ServerName: testServerName, NextProtos: []string{"h2"}})
	realMsg := recordsToMessage(t, realHello)
	bigMsg := spec{exts: [][]byte{sniExt("a"), ext(21, make([]byte, 4000))}}.msg()
	twoRecs := fragment(realMsg, 100)
	badSecond := bytes.Clone(twoRecs)
	badSecond[105] = 0x17
	// Second record claims one byte more than the message has left.
	overlong := slices.Concat(fragment(realMsg[:100], 100), []byte{0x16, 3, 1, byte((len(realMsg) - 99) >> 8), byte(len(realMsg) - 99)}, realMsg[100:], []byte{0})
	trailingInRecord := fragment(append(bytes.Clone(realMsg), 0xAA), 1<<14)

	whole := -1
	tests := []struct {
		name     string
		in       []byte
		maxBytes int
		want     error
		consumed int // bytes Peek must have read; whole means len(in)
	}{
		{"empty", nil, 0, io.EOF, 0},
		{"http", []byte("GET / HTTP/1.1\r\n"), 0, ErrNotTLS, 1},
		{"ssl2-hello", []byte{0x80, 0x2e, 0x01}, 0, ErrNotTLS, 1},
		{"only-type-byte", []byte{0x16}, 0, io.ErrUnexpectedEOF, whole},
		{"short-record-header", []byte{0x16, 3, 1}, 0, io.ErrUnexpectedEOF, whole},
		{"record-major-2", []byte{0x16, 2, 0, 0, 50}, 0, ErrMalformed, whole},
		{"record-len-zero", []byte{0x16, 3, 1, 0, 0, 1}, 0, ErrMalformed, 5},
		{"record-len-too-big", []byte{0x16, 3, 1, 0x40, 0x01}, 0, ErrMalformed, 5},
		{"server-hello", fragment(handshake(2, spec{}.body()), 1<<14), 0, ErrMalformed, whole},
		{"handshake-len-tiny", fragment([]byte{1, 0, 0, 10}, 4), 0, ErrMalformed, whole},
		{"handshake-len-huge", []byte{0x16, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff}, 0, ErrMalformed, whole},
		{"handshake-len-huge-fragmented", fragment([]byte{1, 0x01, 0x00, 0x00}, 1), MaxBytesLimit, ErrMalformed, whole},
		{"body-shorter-than-header-says", fragment(realMsg[:len(realMsg)-3], 1<<14), 0, io.ErrUnexpectedEOF, whole},
		{"trailing-in-record", trailingInRecord, 0, ErrMalformed, whole},
		{"later-record-overlong", overlong, 0, ErrMalformed, 105 + 5},
		{"non-handshake-second-record", badSecond, 0, ErrMalformed, 110},
		{"exceeds-max-early", realHello, 100, ErrMalformed, 5},
		{"exceeds-max-by-one", realHello, len(realHello) - 1, ErrMalformed, 5},
		{"fits-max-exactly", slices.Concat(realHello, trailer), len(realHello), nil, len(realHello)},
		{"fragmented-exceeds-max-before-body", twoRecs, 104, ErrMalformed, 5},
		{"fragmented-exceeds-max-after-first", twoRecs, 110, ErrMalformed, 105},
		// 1-byte records cost 6 bytes each, so the budget runs out on a
		// record boundary.
		{"one-byte-records-exceed-default", fragment(bigMsg, 1), 0, ErrMalformed, DefaultMaxBytes - DefaultMaxBytes%6},
		{"one-byte-records-within-limit", fragment(bigMsg, 1), MaxBytesLimit, nil, whole},
		{"max-bytes-clamped", fragment(bigMsg, 1), 1 << 30, nil, whole},
		{"session-id-33", spec{sessionID: make([]byte, 33)}.records(), 0, ErrMalformed, whole},
		{"suites-odd", spec{suites: []byte{0x13, 0x01, 0x13}}.records(), 0, ErrMalformed, whole},
		{"suites-empty", spec{suites: []byte{}}.records(), 0, ErrMalformed, whole},
		{"compression-empty", spec{comp: []byte{}}.records(), 0, ErrMalformed, whole},
		{"ext-block-too-long", spec{rawExts: []byte{0, 5, 0, 0}}.records(), 0, ErrMalformed, whole},
		{"ext-block-trailing", spec{rawExts: slices.Concat(v16(), []byte{0})}.records(), 0, ErrMalformed, whole},
		{"ext-block-one-byte", spec{rawExts: []byte{0}}.records(), 0, ErrMalformed, whole},
		{"ext-header-truncated", spec{rawExts: v16([]byte{0})}.records(), 0, ErrMalformed, whole},
		{"ext-data-too-long", spec{rawExts: v16([]byte{0, 0, 0, 9, 1})}.records(), 0, ErrMalformed, whole},
		{"sni-empty-ext", spec{exts: [][]byte{ext(0)}}.records(), 0, ErrMalformed, whole},
		{"sni-empty-list", spec{exts: [][]byte{ext(0, v16())}}.records(), 0, ErrMalformed, whole},
		{"sni-list-trailing", spec{exts: [][]byte{ext(0, v16([]byte{0}, v16([]byte("a"))), []byte{0})}}.records(), 0, ErrMalformed, whole},
		{"sni-entry-truncated", spec{exts: [][]byte{ext(0, v16([]byte{0, 0, 5, 'a'}))}}.records(), 0, ErrMalformed, whole},
		{"sni-empty-name", spec{exts: [][]byte{sniExt("")}}.records(), 0, ErrMalformed, whole},
		{"sni-name-256", spec{exts: [][]byte{sniExt(strings.Repeat("a", 256))}}.records(), 0, ErrMalformed, whole},
		{"sni-trailing-dot", spec{exts: [][]byte{sniExt("a.example.")}}.records(), 0, ErrMalformed, whole},
		{"sni-duplicate-ext", spec{exts: [][]byte{sniExt("a"), sniExt("a")}}.records(), 0, ErrMalformed, whole},
		{"sni-two-host-names", spec{exts: [][]byte{sniExt("a", "b")}}.records(), 0, ErrMalformed, whole},
		{"alpn-empty-ext", spec{exts: [][]byte{ext(16)}}.records(), 0, ErrMalformed, whole},
		{"alpn-empty-list", spec{exts: [][]byte{alpnExt()}}.records(), 0, ErrMalformed, whole},
		{"alpn-empty-proto", spec{exts: [][]byte{alpnExt("h2", "")}}.records(), 0, ErrMalformed, whole},
		{"alpn-proto-truncated", spec{exts: [][]byte{ext(16, v16([]byte{5, 'h'}))}}.records(), 0, ErrMalformed, whole},
		{"alpn-list-trailing", spec{exts: [][]byte{ext(16, v16(v8([]byte("h2"))), []byte{0})}}.records(), 0, ErrMalformed, whole},
		{"alpn-duplicate-ext", spec{exts: [][]byte{alpnExt("h2"), alpnExt("h2")}}.records(), 0, ErrMalformed, whole},
	}
	for _, bad := range []string{"a b", "a/b", "a\x00b", "caf\xc3\xa9", "a:443", "*.example", "a@b", "[::1]", "a,b", "a\n"} {
		tests = append(tests, struct {
			name     string
			in       []byte
			maxBytes int
			want     error
			consumed int
		}{"sni-bad-char-" + bad, spec{exts: [][]byte{sniExt(bad)}}.records(), 0, ErrMalformed, whole})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := bytes.NewReader(tt.in)
			h, consumed, err := Peek(src, nil, tt.maxBytes)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.want == io.EOF && err != io.EOF {
				t.Errorf("err = %#v, want io.EOF itself so == comparisons work", err)
			}
			if tt.want != nil && (h.ServerName != "" || h.ALPN != nil) {
				t.Errorf("non-zero Hello on error: %+v", h)
			}
			want := tt.consumed
			if want == whole {
				want = len(tt.in)
			}
			if len(consumed) != want || !bytes.Equal(consumed, tt.in[:want]) {
				t.Errorf("consumed %d bytes, want the first %d", len(consumed), want)
			}
			if src.Len() != len(tt.in)-len(consumed) {
				t.Errorf("read %d bytes from r but consumed reports %d", len(tt.in)-src.Len(), len(consumed))
			}
			if max := tt.maxBytes; max > 0 && len(consumed) > max {
				t.Errorf("consumed %d > maxBytes %d", len(consumed), max)
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	body := spec{exts: [][]byte{sniExt("a")}}.body()
	msg := handshake(1, body)
	for _, in := range [][]byte{nil, {1, 0, 0}, body, msg[:len(msg)-1], append(bytes.Clone(msg), 0), handshake(2, body)} {
		if _, err := Parse(in); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(% x...) err = %v, want ErrMalformed", in[:min(len(in), 8)], err)
		}
	}
}

// errAfterReader fails with a non-EOF error once its data runs out, like a
// connection hitting its read deadline.
type errAfterReader struct {
	r   io.Reader
	err error
}

func (e errAfterReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		err = e.err
	}
	return n, err
}

func TestPeekReadErrorWrapped(t *testing.T) {
	hello := captureHello(t, &tls.Config{ServerName: testServerName})
	deadline := &net.OpError{Op: "read", Err: errors.New("i/o timeout")}
	_, consumed, err := Peek(errAfterReader{bytes.NewReader(hello[:50]), deadline}, nil, 0)
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Fatalf("err = %v, want wrapped *net.OpError", err)
	}
	if !bytes.Equal(consumed, hello[:50]) {
		t.Fatalf("consumed %d bytes, want 50", len(consumed))
	}
}

func TestPeekAllocs(t *testing.T) {
	withALPN := captureHello(t, &tls.Config{ServerName: testServerName, NextProtos: []string{"h2", "http/1.1"}})
	tests := []struct {
		name string
		in   []byte
		max  float64
	}{
		{"sni-only", captureHello(t, &tls.Config{ServerName: testServerName}), 1},
		{"sni-only-fragmented", fragment(recordsToMessage(t, captureHello(t, &tls.Config{ServerName: testServerName})), 100), 1},
		{"no-sni-no-alpn", captureHello(t, &tls.Config{InsecureSkipVerify: true}), 0},
		// Well-known protocol IDs are interned; only the []string is new.
		{"sni-and-known-alpn", withALPN, 2},
		// Unknown IDs share one backing string however many there are.
		{"sni-and-custom-alpn", captureHello(t, &tls.Config{ServerName: testServerName, NextProtos: []string{"a", "b", "c", "d"}}), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]byte, 0, 8192)
			r := bytes.NewReader(nil)
			allocs := testing.AllocsPerRun(100, func() {
				r.Reset(tt.in)
				if _, _, err := Peek(r, buf, 0); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > tt.max {
				t.Errorf("Peek allocs = %v, want <= %v", allocs, tt.max)
			}
		})
	}
}

// stdlibHello runs raw through crypto/tls's server-side parser and reports
// what it saw, so our parse can be cross-checked against the implementation
// the bytes will be replayed to.
func stdlibHello(raw []byte) (*tls.ClientHelloInfo, bool) {
	var got *tls.ClientHelloInfo
	stop := errors.New("stop")
	cfg := &tls.Config{GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		got = chi
		return nil, stop
	}}
	c := &replayConn{r: bytes.NewReader(raw)}
	_ = tls.Server(c, cfg).Handshake()
	return got, got != nil
}

type replayConn struct {
	recordConn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestAgreesWithCryptoTLS(t *testing.T) {
	for _, tc := range realCases() {
		hello := captureHello(t, tc.cfg)
		for _, in := range [][]byte{hello, fragment(recordsToMessage(t, hello), 1), fragment(recordsToMessage(t, hello), 77)} {
			h, _, err := Peek(bytes.NewReader(in), nil, MaxBytesLimit)
			if err != nil {
				t.Fatalf("%s: Peek: %v", tc.name, err)
			}
			chi, ok := stdlibHello(in)
			if !ok {
				t.Fatalf("%s: crypto/tls rejected the hello", tc.name)
			}
			if strings.ToLower(chi.ServerName) != h.ServerName || !slices.Equal(chi.SupportedProtos, h.ALPN) {
				t.Errorf("%s: crypto/tls saw %q %q, Peek saw %q %q", tc.name, chi.ServerName, chi.SupportedProtos, h.ServerName, h.ALPN)
			}
		}
	}
}

// prefixConn is how a caller replays consumed bytes to crypto/tls.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestReplayToCryptoTLS(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: testServerName},
		DNSNames:     []string{testServerName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)

	for _, maxVer := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cliConn, srvConn := net.Pipe()
		errc := make(chan error, 1)
		go func() {
			defer cliConn.Close()
			c := tls.Client(cliConn, &tls.Config{ServerName: testServerName, RootCAs: roots, NextProtos: []string{"h2"}, MaxVersion: maxVer})
			if err := c.Handshake(); err != nil {
				errc <- err
				return
			}
			_, err := c.Write([]byte("ping"))
			errc <- err
		}()

		buf := make([]byte, 0, 4096)
		h, consumed, err := Peek(srvConn, buf, 0)
		if err != nil {
			t.Fatalf("Peek: %v", err)
		}
		checkHello(t, h, testServerName, []string{"h2"})
		srv := tls.Server(&prefixConn{srvConn, io.MultiReader(bytes.NewReader(consumed), srvConn)}, &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
			NextProtos:   []string{"h2"},
		})
		got := make([]byte, 4)
		if _, err := io.ReadFull(srv, got); err != nil {
			t.Fatalf("server read: %v", err)
		}
		if string(got) != "ping" || srv.ConnectionState().NegotiatedProtocol != "h2" || srv.ConnectionState().Version != maxVer {
			t.Fatalf("got %q, state %+v", got, srv.ConnectionState())
		}
		if err := <-errc; err != nil {
			t.Fatalf("client: %v", err)
		}
		srv.Close()
	}
}

func seedHellos(tb testing.TB) [][]byte {
	var out [][]byte
	for _, tc := range realCases() {
		h := captureHello(tb, tc.cfg)
		out = append(out, h, fragment(recordsToMessage(tb, h), 1, 3, 50))
	}
	out = append(out,
		spec{exts: [][]byte{sniExt("a", "b"), alpnExt("h2", "x")}}.records(),
		spec{exts: [][]byte{ext(0, v16([]byte{7}, v16([]byte("??")), []byte{0}, v16([]byte("ok"))))}}.records(),
		spec{noExts: true}.records(),
	)
	return out
}

func FuzzParse(f *testing.F) {
	for _, s := range seedHellos(f) {
		f.Add(recordsToMessage(f, s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		orig := bytes.Clone(msg)
		h, err := Parse(msg)
		if !bytes.Equal(msg, orig) {
			t.Fatal("Parse modified its input")
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if h.ServerName != "" || h.ALPN != nil {
				t.Fatalf("non-zero Hello on error: %+v", h)
			}
			return
		}
		checkInvariants(t, h)
	})
}

func checkInvariants(t *testing.T, h Hello) {
	t.Helper()
	if len(h.ServerName) > 255 || strings.HasSuffix(h.ServerName, ".") {
		t.Fatalf("bad ServerName %q", h.ServerName)
	}
	for _, c := range []byte(h.ServerName) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			t.Fatalf("ServerName %q has byte %q", h.ServerName, c)
		}
	}
	if h.ALPN != nil && len(h.ALPN) == 0 {
		t.Fatal("non-nil empty ALPN")
	}
	for _, p := range h.ALPN {
		if p == "" {
			t.Fatal("empty ALPN protocol")
		}
	}
}

func FuzzPeek(f *testing.F) {
	for _, s := range seedHellos(f) {
		f.Add(s, uint16(0))
		f.Add(append(bytes.Clone(s), trailer...), uint16(len(s)))
	}
	f.Add([]byte("GET / HTTP/1.1\r\n"), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, maxBytes uint16) {
		src := bytes.NewReader(data)
		h, consumed, err := Peek(src, nil, int(maxBytes))
		if !bytes.HasPrefix(data, consumed) {
			t.Fatal("consumed is not a prefix of the input")
		}
		if src.Len() != len(data)-len(consumed) {
			t.Fatalf("read %d bytes, consumed reports %d", len(data)-src.Len(), len(consumed))
		}
		limit := int(maxBytes)
		if limit == 0 {
			limit = DefaultMaxBytes
		}
		if len(consumed) > limit {
			t.Fatalf("consumed %d > maxBytes %d", len(consumed), limit)
		}
		switch {
		case err == nil:
			checkInvariants(t, h)
		case err == io.EOF:
			if len(data) != 0 {
				t.Fatal("io.EOF on non-empty input")
			}
		case errors.Is(err, ErrNotTLS):
			if len(consumed) != 1 || consumed[0] == 0x16 {
				t.Fatalf("ErrNotTLS with consumed % x", consumed)
			}
		case errors.Is(err, io.ErrUnexpectedEOF):
			if len(consumed) != len(data) {
				t.Fatal("ErrUnexpectedEOF before the input ran out")
			}
		case errors.Is(err, ErrMalformed):
		default:
			t.Fatalf("unexpected error class: %v", err)
		}

		// Read granularity and buffer reuse must not change the outcome.
		src2 := bytes.NewReader(data)
		h2, consumed2, err2 := Peek(iotest.OneByteReader(src2), make([]byte, 0, 7), int(maxBytes))
		if err2 != err || !bytes.Equal(consumed2, consumed) || h2.ServerName != h.ServerName || !slices.Equal(h2.ALPN, h.ALPN) {
			t.Fatalf("one-byte reader disagrees: (%+v, %d, %v) vs (%+v, %d, %v)", h2, len(consumed2), err2, h, len(consumed), err)
		}

		if err == nil {
			if chi, ok := stdlibHello(consumed); ok {
				if strings.ToLower(chi.ServerName) != h.ServerName || !slices.Equal(chi.SupportedProtos, h.ALPN) {
					t.Fatalf("crypto/tls saw %q %q, Peek saw %q %q", chi.ServerName, chi.SupportedProtos, h.ServerName, h.ALPN)
				}
			}
		}
	})
}

func BenchmarkPeek(b *testing.B) {
	hello := captureHello(b, &tls.Config{ServerName: testServerName, NextProtos: []string{"h2", "http/1.1"}})
	frag := fragment(recordsToMessage(b, hello), 100)
	for _, bc := range []struct {
		name string
		in   []byte
		buf  []byte
	}{
		{"single-record/pooled", hello, make([]byte, 0, 8192)},
		{"single-record/nil-buf", hello, nil},
		{"100B-records/pooled", frag, make([]byte, 0, 8192)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.in)))
			r := bytes.NewReader(nil)
			for b.Loop() {
				r.Reset(bc.in)
				if _, _, err := Peek(r, bc.buf, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	msg := recordsToMessage(b, captureHello(b, &tls.Config{ServerName: testServerName, NextProtos: []string{"h2", "http/1.1"}}))
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := Parse(msg); err != nil {
			b.Fatal(err)
		}
	}
}
