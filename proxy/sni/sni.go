// Package sni extracts the server name and ALPN protocols from a TLS
// ClientHello without terminating TLS, so that the single public port can
// route a connection either to a raw TCP backend (passthrough) or to
// crypto/tls after replaying the bytes it had to read.
package sni

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

var (
	// ErrNotTLS reports that the first byte is not a TLS handshake record
	// (0x16); the caller should treat the connection as some other protocol.
	ErrNotTLS = errors.New("sni: not a TLS handshake record")

	// ErrMalformed is wrapped by every parse failure so callers can tell a
	// broken or hostile ClientHello from an I/O error with errors.Is.
	ErrMalformed = errors.New("sni: malformed ClientHello")
)

const (
	// DefaultMaxBytes is used when Peek is given maxBytes <= 0. Real
	// ClientHellos, including post-quantum key shares (~1.8 KB), fit easily
	// in one maximum-size record; the slack covers a few record headers for
	// clients that fragment.
	DefaultMaxBytes = maxRecordPayload + 4*recordHeaderLen

	// MaxBytesLimit caps maxBytes: a ClientHello larger than this is not
	// something a legitimate client sends, and an unbounded value would let
	// a peer make us buffer up to 16 MiB (the 24-bit handshake length).
	MaxBytesLimit = 64 << 10
)

const (
	recordHeaderLen       = 5
	handshakeHeaderLen    = 4
	maxRecordPayload      = 1 << 14 // TLSPlaintext.length limit, RFC 8446 5.1
	recordTypeHandshake   = 0x16
	handshakeClientHello  = 1
	extServerName         = 0
	extALPN               = 16
	extEarlyData          = 42
	sniHostName           = 0
	maxHostNameLen        = 255
	maxSessionIDLen       = 32
	minClientHelloBodyLen = 2 + 32 + 1 + 2 + 2 + 1 + 1 // version, random, empty sid, one suite, one compression method
)

// Static errors keep the rejection path allocation-free: junk traffic on a
// public port should not cost more than a valid hello.
var (
	errMaxBytes      = malformed("ClientHello exceeds maxBytes")
	errRecordType    = malformed("non-handshake record inside ClientHello")
	errRecordVersion = malformed("record version major is not 3")
	errRecordLen     = malformed("bad record length")
	errTrailing      = malformed("data after ClientHello")
	errHandshakeType = malformed("handshake message is not a ClientHello")
	errHandshakeLen  = malformed("bad handshake length")
	errShort         = malformed("truncated ClientHello body")
	errSessionID     = malformed("legacy_session_id longer than 32 bytes")
	errCipherSuites  = malformed("bad cipher_suites length")
	errCompression   = malformed("empty legacy_compression_methods")
	errExtensions    = malformed("bad extensions block")
	errDupExtension  = malformed("duplicate extension")
	errServerName    = malformed("bad server_name extension")
	errHostName      = malformed("invalid host_name")
	errDupHostName   = malformed("more than one host_name")
	errALPN          = malformed("bad application_layer_protocol_negotiation extension")
)

func malformed(what string) error { return fmt.Errorf("sni: %s: %w", what, ErrMalformed) }

// Hello holds the routing-relevant fields of a ClientHello.
type Hello struct {
	// ServerName is the lowercased host_name, or "" when the client sent no
	// server_name extension (or one without a host_name entry).
	ServerName string
	// ALPN is the client's protocol list in preference order, nil when the
	// extension is absent.
	ALPN []string
	// EarlyData is set when the client offers TLS 1.3 0-RTT data
	// (RFC 8446 4.2.10). Early data is encrypted application data sent
	// before the handshake ends, so a proxy that watches for the client's
	// first application-data record cannot tell it from a finished
	// handshake.
	EarlyData bool
}

// Peek reads a complete ClientHello from r and returns it parsed together
// with every byte it read, so the caller can replay them to a backend or to
// crypto/tls. consumed is returned on every error as well, because the bytes
// are gone from r either way.
//
// Peek reads exactly the records that carry the ClientHello (which may be
// fragmented across several records, RFC 8446 5.1) and never beyond the last
// one, so whatever follows stays in r. It first reads a single byte so that a
// non-TLS connection costs one byte of replay and yields ErrNotTLS.
//
// buf is scratch space: consumed is built from buf[0] (len(buf) is ignored)
// and aliases buf when cap(buf) suffices, growing a new array otherwise. Its
// spare capacity is also used to reassemble fragmented hellos, so with a
// pooled buffer the only allocations are the strings in Hello. buf may be nil.
//
// maxBytes bounds the total number of bytes read; <= 0 means
// DefaultMaxBytes, and values above MaxBytesLimit are clamped to it. The
// limit is enforced before reading, so a hostile length never makes Peek
// block on or buffer data it will reject.
//
// A zero-byte stream yields io.EOF; a stream ending mid-hello yields an error
// wrapping io.ErrUnexpectedEOF; other read errors are wrapped.
func Peek(r io.Reader, buf []byte, maxBytes int) (hello Hello, consumed []byte, err error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	maxBytes = min(maxBytes, MaxBytesLimit)

	b := buf[:0]
	if b, err = readMore(r, b, 1); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		return Hello{}, b, err
	}
	if b[0] != recordTypeHandshake {
		return Hello{}, b, ErrNotTLS
	}

	var (
		hdr     [handshakeHeaderLen]byte
		hsRead  int // handshake bytes seen so far, across records
		msgLen  = -1
		records int
	)
	for msgLen < 0 || hsRead < msgLen {
		start := len(b)
		need := recordHeaderLen
		if records == 0 {
			start, need = 0, recordHeaderLen-1
		}
		if len(b)+need > maxBytes {
			return Hello{}, b, errMaxBytes
		}
		if b, err = readMore(r, b, need); err != nil {
			return Hello{}, b, err
		}
		rh := b[start : start+recordHeaderLen]
		if rh[0] != recordTypeHandshake {
			// RFC 8446 5.1 forbids interleaving other record types with
			// a fragmented handshake message.
			return Hello{}, b, errRecordType
		}
		if rh[1] != 3 {
			return Hello{}, b, errRecordVersion
		}
		recLen := int(rh[3])<<8 | int(rh[4])
		if recLen == 0 || recLen > maxRecordPayload {
			return Hello{}, b, errRecordLen
		}
		if msgLen >= 0 && recLen > msgLen-hsRead {
			// Checked before reading so we never pull bytes that belong
			// to whatever the client sends after the hello.
			return Hello{}, b, errTrailing
		}
		if len(b)+recLen > maxBytes {
			return Hello{}, b, errMaxBytes
		}
		if b, err = readMore(r, b, recLen); err != nil {
			return Hello{}, b, err
		}
		records++

		// The 4-byte handshake header itself may be split across records,
		// so it is collected separately to learn the message length early.
		if hsRead < handshakeHeaderLen {
			copy(hdr[hsRead:], b[len(b)-recLen:])
			if hdr[0] != handshakeClientHello {
				return Hello{}, b, errHandshakeType
			}
		}
		hsRead += recLen
		if msgLen < 0 && hsRead >= handshakeHeaderLen {
			bodyLen := int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
			if bodyLen < minClientHelloBodyLen {
				return Hello{}, b, errHandshakeLen
			}
			msgLen = handshakeHeaderLen + bodyLen
			if hsRead > msgLen {
				return Hello{}, b, errTrailing
			}
			// Fail now rather than after reading up to maxBytes: the
			// remainder needs at least one more record header.
			if rest := msgLen - hsRead; rest > 0 && len(b)+recordHeaderLen+rest > maxBytes {
				return Hello{}, b, errMaxBytes
			}
		}
	}

	var msg []byte
	if records == 1 {
		msg = b[recordHeaderLen:]
	} else {
		// Reassemble into buf's spare capacity when there is room so that
		// fragmented hellos stay allocation-free with a pooled buffer.
		if spare := b[len(b):cap(b)]; len(spare) >= msgLen {
			msg = spare[:0]
		} else {
			msg = make([]byte, 0, msgLen)
		}
		for off := 0; off < len(b); {
			n := int(b[off+3])<<8 | int(b[off+4])
			msg = append(msg, b[off+recordHeaderLen:off+recordHeaderLen+n]...)
			off += recordHeaderLen + n
		}
	}
	hello, err = Parse(msg)
	return hello, b, err
}

// readMore appends exactly n bytes from r to b. EOF is always unexpected
// here except for the very first byte, which the caller special-cases.
func readMore(r io.Reader, b []byte, n int) ([]byte, error) {
	l := len(b)
	b = slices.Grow(b, n)[:l+n]
	m, err := io.ReadFull(r, b[l:])
	b = b[:l+m]
	switch {
	case err == nil:
		return b, nil
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return b, io.ErrUnexpectedEOF
	default:
		return b, fmt.Errorf("sni: reading ClientHello: %w", err)
	}
}

// Parse parses a complete ClientHello handshake message INCLUDING its 4-byte
// handshake header (msg_type and 24-bit length), i.e. the record payloads
// concatenated with the record headers removed. The returned Hello does not
// alias clientHello.
func Parse(clientHello []byte) (Hello, error) {
	s := clientHello
	if len(s) < handshakeHeaderLen {
		return Hello{}, errShort
	}
	if s[0] != handshakeClientHello {
		return Hello{}, errHandshakeType
	}
	bodyLen := int(s[1])<<16 | int(s[2])<<8 | int(s[3])
	if bodyLen != len(s)-handshakeHeaderLen {
		return Hello{}, errHandshakeLen
	}
	s = s[handshakeHeaderLen:]

	if len(s) < 2+32 { // legacy_version, random
		return Hello{}, errShort
	}
	s = s[2+32:]

	sid, s, ok := vec8(s)
	if !ok {
		return Hello{}, errShort
	}
	if len(sid) > maxSessionIDLen {
		return Hello{}, errSessionID
	}
	suites, s, ok := vec16(s)
	if !ok {
		return Hello{}, errShort
	}
	if len(suites) == 0 || len(suites)%2 != 0 {
		return Hello{}, errCipherSuites
	}
	comp, s, ok := vec8(s)
	if !ok {
		return Hello{}, errShort
	}
	if len(comp) == 0 {
		return Hello{}, errCompression
	}

	var h Hello
	if len(s) == 0 {
		// Pre-TLS 1.3 clients may omit the extensions block entirely.
		return h, nil
	}
	exts, s, ok := vec16(s)
	if !ok || len(s) != 0 {
		return Hello{}, errExtensions
	}
	var seenSNI, seenALPN bool
	for len(exts) > 0 {
		if len(exts) < 2 {
			return Hello{}, errExtensions
		}
		typ := uint16(exts[0])<<8 | uint16(exts[1])
		var data []byte
		if data, exts, ok = vec16(exts[2:]); !ok {
			return Hello{}, errExtensions
		}
		var err error
		switch typ {
		case extServerName:
			if seenSNI {
				return Hello{}, errDupExtension
			}
			seenSNI = true
			if h.ServerName, err = parseServerName(data); err != nil {
				return Hello{}, err
			}
		case extEarlyData:
			h.EarlyData = true
		case extALPN:
			if seenALPN {
				return Hello{}, errDupExtension
			}
			seenALPN = true
			if h.ALPN, err = parseALPN(data); err != nil {
				return Hello{}, err
			}
		}
	}
	return h, nil
}

// parseServerName follows RFC 6066 section 3 the way crypto/tls does:
// unknown name types are skipped, but at most one host_name is allowed.
func parseServerName(data []byte) (string, error) {
	list, rest, ok := vec16(data)
	if !ok || len(rest) != 0 || len(list) == 0 {
		return "", errServerName
	}
	var name []byte
	var found bool
	for len(list) > 0 {
		typ := list[0]
		var v []byte
		if v, list, ok = vec16(list[1:]); !ok {
			return "", errServerName
		}
		if typ != sniHostName {
			continue
		}
		if found {
			return "", errDupHostName
		}
		found, name = true, v
	}
	if !found {
		return "", nil
	}
	return canonicalHostName(name)
}

// canonicalHostName restricts the name to a conservative charset because it
// is used as a routing key: anything else (spaces, slashes, NULs, UTF-8,
// IP-literal syntax) would be either an attack on a downstream lookup or a
// client bug. A trailing dot is rejected as in crypto/tls (RFC 6066 forbids
// it), which also keeps "a.example" and "a.example." from being distinct keys.
func canonicalHostName(name []byte) (string, error) {
	if len(name) == 0 || len(name) > maxHostNameLen || name[len(name)-1] == '.' {
		return "", errHostName
	}
	var lower [maxHostNameLen]byte
	for i, c := range name {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '-', c == '_':
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		default:
			return "", errHostName
		}
		lower[i] = c
	}
	return string(lower[:len(name)]), nil
}

// parseALPN returns well-known protocol IDs as constants and slices every
// other ID out of one shared string, so a hello costs at most two
// allocations here no matter how many protocols a peer lists.
func parseALPN(data []byte) ([]string, error) {
	list, rest, ok := vec16(data)
	if !ok || len(rest) != 0 || len(list) == 0 {
		return nil, errALPN
	}
	n := 0
	for p := list; len(p) > 0; n++ {
		var proto []byte
		if proto, p, ok = vec8(p); !ok || len(proto) == 0 {
			return nil, errALPN
		}
	}
	out := make([]string, 0, n)
	var shared string
	for off := 0; off < len(list); {
		l := int(list[off])
		proto := list[off+1 : off+1+l]
		s, known := wellKnownALPN(proto)
		if !known {
			if shared == "" {
				shared = string(list)
			}
			s = shared[off+1 : off+1+l]
		}
		out = append(out, s)
		off += 1 + l
	}
	return out, nil
}

// wellKnownALPN covers what browsers and common clients actually send; the
// switch on string(p) does not allocate.
func wellKnownALPN(p []byte) (string, bool) {
	switch string(p) {
	case "h2":
		return "h2", true
	case "http/1.1":
		return "http/1.1", true
	case "h3":
		return "h3", true
	case "http/1.0":
		return "http/1.0", true
	case "acme-tls/1":
		return "acme-tls/1", true
	}
	return "", false
}

func vec8(s []byte) (v, rest []byte, ok bool) {
	if len(s) < 1 {
		return nil, nil, false
	}
	n := int(s[0])
	if len(s)-1 < n {
		return nil, nil, false
	}
	return s[1 : 1+n], s[1+n:], true
}

func vec16(s []byte) (v, rest []byte, ok bool) {
	if len(s) < 2 {
		return nil, nil, false
	}
	n := int(s[0])<<8 | int(s[1])
	if len(s)-2 < n {
		return nil, nil, false
	}
	return s[2 : 2+n], s[2+n:], true
}
