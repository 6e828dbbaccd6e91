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
	"strconv"
	"strings"
	"testing"
	"time"
)

// Benchmarks of Peek on ClientHellos captured from crypto/tls, of the sizes
// real clients send: a small TLS 1.2 hello, a TLS 1.3 hello with one
// classical key share, Go's default hello with a post-quantum key share, a
// resumption hello carrying a PSK, and one with a long name and many ALPN
// IDs. No ECH. Everything here is in memory: no sockets.

// benchSelfSigned is a throwaway server certificate for the in-memory
// handshake that yields a session ticket.
func benchSelfSigned(tb testing.TB) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: testServerName},
		DNSNames:     []string{testServerName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// resumptionHello completes one TLS 1.3 handshake over net.Pipe to obtain a
// session ticket, then captures the ClientHello that resumes with it (it
// carries pre_shared_key and psk_key_exchange_modes on top of the usual
// extensions).
func resumptionHello(tb testing.TB, nextProtos []string) []byte {
	tb.Helper()
	ccfg := &tls.Config{
		ServerName:         testServerName,
		InsecureSkipVerify: true, // only the ticket matters here
		NextProtos:         nextProtos,
		ClientSessionCache: tls.NewLRUClientSessionCache(1),
	}
	scfg := &tls.Config{Certificates: []tls.Certificate{benchSelfSigned(tb)}, NextProtos: nextProtos}
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = cc.SetDeadline(deadline)
	_ = sc.SetDeadline(deadline)
	serverErr := make(chan error, 1)
	go func() {
		ts := tls.Server(sc, scfg)
		if err := ts.Handshake(); err != nil {
			serverErr <- err
			return
		}
		// The ticket is sent after the handshake; this byte follows it.
		_, err := ts.Write([]byte{1})
		serverErr <- err
	}()
	tc := tls.Client(cc, ccfg)
	if err := tc.Handshake(); err != nil {
		tb.Fatalf("handshake for a session ticket: %v", err)
	}
	var one [1]byte
	if _, err := io.ReadFull(tc, one[:]); err != nil {
		tb.Fatalf("reading past the session ticket: %v", err)
	}
	if err := <-serverErr; err != nil {
		tb.Fatalf("server side: %v", err)
	}
	hello := captureHello(tb, ccfg)
	if !hasExtension(tb, hello, 41) { // pre_shared_key
		tb.Fatal("the resumption ClientHello carries no pre_shared_key extension")
	}
	return hello
}

// hasExtension reports whether a single-record ClientHello carries
// extension typ.
func hasExtension(tb testing.TB, records []byte, typ uint16) bool {
	tb.Helper()
	s := recordsToMessage(tb, records)[handshakeHeaderLen+2+32:]
	var ok bool
	if _, s, ok = vec8(s); !ok { // session id
		tb.Fatal("short hello")
	}
	if _, s, ok = vec16(s); !ok { // cipher suites
		tb.Fatal("short hello")
	}
	if _, s, ok = vec8(s); !ok { // compression
		tb.Fatal("short hello")
	}
	exts, _, ok := vec16(s)
	if !ok {
		tb.Fatal("no extensions")
	}
	for len(exts) >= 4 {
		t := uint16(exts[0])<<8 | uint16(exts[1])
		if t == typ {
			return true
		}
		if _, exts, ok = vec16(exts[2:]); !ok {
			tb.Fatal("bad extensions")
		}
	}
	return false
}

type peekBenchCase struct {
	name     string
	in       []byte
	wantName string
	wantALPN []string
}

func peekBenchCases(tb testing.TB) []peekBenchCase {
	tb.Helper()
	h2 := []string{"h2", "http/1.1"}
	longName := "daskgateway-" + strings.Repeat("0123456789abcdef", 3) + "." +
		strings.Repeat("sub-domain-label.", 8) + "clusters.example.com"
	var customALPN []string
	for i := range 16 {
		customALPN = append(customALPN, "dask-proto/"+strings.Repeat("v", i+1))
	}
	defaultHello := captureHello(tb, &tls.Config{ServerName: testServerName, NextProtos: h2})
	return []peekBenchCase{
		{"tls12-only", captureHello(tb, &tls.Config{ServerName: testServerName, NextProtos: []string{"http/1.1"}, MaxVersion: tls.VersionTLS12}),
			testServerName, []string{"http/1.1"}},
		{"tls13-x25519-only", captureHello(tb, &tls.Config{ServerName: testServerName, NextProtos: h2, MinVersion: tls.VersionTLS13,
			CurvePreferences: []tls.CurveID{tls.X25519}}),
			testServerName, h2},
		{"default-mlkem-keyshare", defaultHello, testServerName, h2},
		{"resumption-psk", resumptionHello(tb, h2), testServerName, h2},
		{"long-name-16-custom-alpn", captureHello(tb, &tls.Config{ServerName: strings.ToUpper(longName), NextProtos: customALPN}),
			longName, customALPN},
		{"default-in-100B-records", fragment(recordsToMessage(tb, defaultHello), 100), testServerName, h2},
	}
}

// BenchmarkPeekClientHello peeks real ClientHellos the way proxy.Server
// does, into a pooled 4 KiB buffer. Allocations left are the strings of
// Hello: the server name, the ALPN slice, and one shared string for
// protocol IDs that are not interned.
func BenchmarkPeekClientHello(b *testing.B) {
	for _, bc := range peekBenchCases(b) {
		b.Run(bc.name+"/"+strconv.Itoa(len(bc.in))+"B", func(b *testing.B) {
			buf := make([]byte, 0, 4096) // what proxy.New pools
			r := bytes.NewReader(bc.in)
			h, consumed, err := Peek(r, buf, DefaultMaxBytes)
			if err != nil {
				b.Fatalf("Peek: %v", err)
			}
			if h.ServerName != bc.wantName || !slices.Equal(h.ALPN, bc.wantALPN) || !bytes.Equal(consumed, bc.in) {
				b.Fatalf("Peek = %q %q (%d bytes consumed), want %q %q (%d bytes)",
					h.ServerName, h.ALPN, len(consumed), bc.wantName, bc.wantALPN, len(bc.in))
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.in)))
			for b.Loop() {
				r.Reset(bc.in)
				h, consumed, err := Peek(r, buf, DefaultMaxBytes)
				if err != nil || h.ServerName != bc.wantName || len(h.ALPN) != len(bc.wantALPN) || len(consumed) != len(bc.in) {
					b.Fatalf("Peek = %q, %d ALPN IDs, %d bytes, %v", h.ServerName, len(h.ALPN), len(consumed), err)
				}
			}
		})
	}
}

// BenchmarkPeekRejects measures what non-TLS and junk first bytes cost on
// the public port: they must stay allocation-free.
func BenchmarkPeekRejects(b *testing.B) {
	hello := captureHello(b, &tls.Config{ServerName: testServerName})
	wrongType := bytes.Clone(hello)
	wrongType[recordHeaderLen] = 2 // a ServerHello, not a ClientHello
	for _, bc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"plain-http", []byte("GET / HTTP/1.1\r\nHost: gateway\r\n\r\n"), ErrNotTLS},
		{"not-a-clienthello", wrongType, ErrMalformed},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 4096)
			r := bytes.NewReader(nil)
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(bc.in)
				if _, _, err := Peek(r, buf, DefaultMaxBytes); !errors.Is(err, bc.want) {
					b.Fatalf("Peek error = %v, want %v", err, bc.want)
				}
			}
		})
	}
}
