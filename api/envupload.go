package api

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gatewayhq/gateway/images"
)

// Errors of reading a request body, mapped by bodyError.
var (
	// errMalformed: the body is not JSON. 400.
	errMalformed = errors.New("request body is not valid JSON")
	// errBadValue: JSON with a value of the wrong kind. 422.
	errBadValue = errors.New("invalid request body")
	// errCodeTooLarge: the code parts together exceed the gateway's limit.
	// 413.
	errCodeTooLarge = errors.New("the environment's code is too large")
)

const (
	// envSpecBytes bounds the spec (and any other field) of an
	// environment request: all but the code. A spec at images'
	// caps (10,000 conda packages, each with its channel's URL) is
	// under 1.5 MiB; real ones are a few hundred KiB.
	envSpecBytes = 2 << 20
	// codelessBytes: a request body of at most this declared length is
	// read before the build quota is checked, as a spec without code
	// (the CLI's first request) may be answered from an image that exists.
	codelessBytes = 1 << 20
	// maxPartName bounds a JSON key: code part names are short.
	maxPartName = 1 << 10
	// maxCodeParts bounds the code parts of one request: an environment
	// has one per local package or module tree.
	maxCodeParts = images.MaxCodeParts
)

// envUpload is an EnvRequest read from its JSON body (the wire format of
// every client: {"spec": {...}, "code": {"<name>": "<base64>"}}) with its
// code parts base64-decoded, as they arrive, one after the other into one
// file in the upload directory: an upload costs disk while it is handled,
// not memory, and one descriptor however many parts it has. The file is
// unlinked as soon as it is made, so that it goes with its descriptor
// whatever ends the request (an error, a refusal, the client leaving, the
// gateway dying); Close closes it.
type envUpload struct {
	Spec images.Spec
	Code images.Code
	file *os.File
	size int64 // of file
}

// Close closes the upload's file, which frees its disk space.
func (u *envUpload) Close() {
	if u.file != nil {
		_ = u.file.Close()
		u.file = nil
	}
}

// readEnvUpload reads an EnvRequest from body, at most maxCode bytes of
// code (decoded) and envSpecBytes of each other field. The keys may come in
// any order; unknown keys are skipped, as the JSON decoder would.
func readEnvUpload(body io.Reader, dir string, maxCode int64) (*envUpload, error) {
	p := &envReader{br: bufio.NewReaderSize(body, 64<<10), dir: dir, codeLeft: maxCode}
	u := &envUpload{}
	if err := p.object(u); err != nil {
		u.Close()
		return nil, err
	}
	return u, nil
}

type envReader struct {
	br       *bufio.Reader
	dir      string
	codeLeft int64
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// next returns the next byte that is not white space.
func (p *envReader) next() (byte, error) {
	for {
		c, err := p.br.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c, nil
		}
	}
}

// more reads the next byte, where the end of the body is an error.
func (p *envReader) more() (byte, error) {
	c, err := p.next()
	if errors.Is(err, io.EOF) {
		return 0, io.ErrUnexpectedEOF
	}
	return c, err
}

func (p *envReader) object(u *envUpload) error {
	c, err := p.next()
	if err != nil {
		return err // io.EOF: an empty body
	}
	if c != '{' {
		if bytes.IndexByte([]byte(`["-0123456789tfn`), c) >= 0 {
			return fmt.Errorf("%w: the request body must be a JSON object", errBadValue)
		}
		return malformed("invalid character %q looking for beginning of value", c)
	}
	if c, err = p.more(); err != nil {
		return err
	}
	if c != '}' {
		_ = p.br.UnreadByte()
		for {
			key, err := p.key()
			if err != nil {
				return err
			}
			switch {
			case strings.EqualFold(key, "spec"):
				err = p.spec(u)
			case strings.EqualFold(key, "code"):
				err = p.code(u)
			default:
				_, err = p.value()
			}
			if err != nil {
				return err
			}
			if c, err = p.more(); err != nil {
				return err
			}
			if c == '}' {
				break
			}
			if c != ',' {
				return malformed("expected , or } after object value, found %q", c)
			}
		}
	}
	if _, err := p.next(); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return malformed("request body has data after the JSON object")
	}
	return nil
}

// key reads an object key and the colon after it.
func (p *envReader) key() (string, error) {
	c, err := p.more()
	if err != nil {
		return "", err
	}
	if c != '"' {
		return "", malformed("expected a string key, found %q", c)
	}
	raw := []byte{'"'}
	for esc := false; ; {
		c, err := p.br.ReadByte()
		if err != nil {
			return "", noEOF(err)
		}
		raw = append(raw, c)
		if len(raw) > maxPartName {
			return "", fmt.Errorf("%w: a key of over %d bytes", errBadValue, maxPartName)
		}
		if esc {
			esc = false
		} else if c == '\\' {
			esc = true
		} else if c == '"' {
			break
		}
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", malformed("%v", err)
	}
	if c, err = p.more(); err != nil {
		return "", err
	}
	if c != ':' {
		return "", malformed("expected : after object key, found %q", c)
	}
	return key, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// value reads one JSON value whole (at most envSpecBytes), unchecked:
// json.Unmarshal checks it.
func (p *envReader) value() ([]byte, error) {
	c, err := p.more()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	depth, inString, esc := 0, false, false
	for {
		if buf.Len() >= envSpecBytes {
			return nil, fmt.Errorf("%w: the spec (or another field than code) is over %d MiB", errBadValue, envSpecBytes>>20)
		}
		buf.WriteByte(c)
		switch {
		case inString:
			if esc {
				esc = false
			} else if c == '\\' {
				esc = true
			} else if c == '"' {
				inString = false
				if depth == 0 {
					return buf.Bytes(), nil
				}
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth <= 0 {
				if depth < 0 {
					return nil, malformed("unexpected %q", c)
				}
				return buf.Bytes(), nil
			}
		case depth == 0:
			// A number, true, false or null ends where a delimiter starts.
			next, err := p.br.Peek(1)
			if err != nil {
				return nil, noEOF(err)
			}
			if bytes.IndexByte([]byte(",}] \t\r\n"), next[0]) >= 0 {
				return buf.Bytes(), nil
			}
		}
		if c, err = p.br.ReadByte(); err != nil {
			return nil, noEOF(err)
		}
	}
}

func (p *envReader) spec(u *envUpload) error {
	raw, err := p.value()
	if err != nil {
		return err
	}
	// images.Spec decodes its lists element by element against its
	// caps: what a spec costs is bounded by its bytes, whatever its shape.
	err = json.Unmarshal(raw, &u.Spec)
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		// Named as the JSON decoder of the whole request named it.
		ute.Field = strings.TrimSuffix("spec."+ute.Field, ".")
	}
	return err
}

// code reads the code object: each part's base64 string is decoded into a
// file as it is read.
func (p *envReader) code(u *envUpload) error {
	c, err := p.more()
	if err != nil {
		return err
	}
	if c == 'n' {
		_ = p.br.UnreadByte()
		if v, err := p.value(); err != nil || string(v) != "null" {
			return malformed("code: expected an object or null")
		}
		return nil
	}
	if c != '{' {
		return fmt.Errorf("%w: code must be an object of base64 strings by code part name", errBadValue)
	}
	if c, err = p.more(); err != nil || c == '}' {
		return err
	}
	_ = p.br.UnreadByte()
	if u.Code == nil {
		u.Code = images.Code{}
	}
	for {
		name, err := p.key()
		if err != nil {
			return err
		}
		if _, dup := u.Code[name]; dup {
			return fmt.Errorf("%w: code part %q is given twice", errBadValue, name)
		}
		if len(u.Code) == maxCodeParts {
			return fmt.Errorf("%w: more than %d code parts: send the code in fewer zip files", errBadValue, maxCodeParts)
		}
		if c, err = p.more(); err != nil {
			return err
		}
		if c != '"' {
			return fmt.Errorf("%w: code.%s must be a base64 string", errBadValue, name)
		}
		if err := p.part(u, name); err != nil {
			return err
		}
		if c, err = p.more(); err != nil {
			return err
		}
		if c == '}' {
			return nil
		}
		if c != ',' {
			return malformed("expected , or } after a code part, found %q", c)
		}
	}
}

// part decodes one code part's string, its opening quote read, onto the
// end of the upload's file.
func (p *envReader) part(u *envUpload, name string) error {
	if u.file == nil {
		f, err := os.CreateTemp(p.dir, "env-code-*")
		if err != nil {
			return fmt.Errorf("spool the code: %w", err)
		}
		u.file = f
		// Unlinked at once: the descriptor keeps it, and nothing is left
		// to clean up whatever ends the request.
		if err := os.Remove(f.Name()); err != nil {
			return fmt.Errorf("spool the code: %w", err)
		}
	}
	w := &capWriter{w: u.file, left: &p.codeLeft}
	str := &jsonString{br: p.br}
	n, err := io.Copy(w, base64.NewDecoder(base64.StdEncoding, str))
	var cie base64.CorruptInputError
	switch {
	case errors.As(err, &cie):
		return fmt.Errorf("%w: code.%s is not valid base64 (at byte %d of it)", errBadValue, name, int64(cie))
	case errors.Is(err, io.ErrUnexpectedEOF) && str.done:
		return fmt.Errorf("%w: code.%s is not valid base64 (its length is not a multiple of 4)", errBadValue, name)
	case err != nil:
		return noEOF(err)
	}
	u.Code[name] = io.NewSectionReader(u.file, u.size, n)
	u.size += n
	return nil
}

// capWriter fails once more than *left bytes are written through it.
type capWriter struct {
	w    io.Writer
	left *int64
}

func (c *capWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > *c.left {
		return 0, errCodeTooLarge
	}
	*c.left -= int64(len(b))
	return c.w.Write(b)
}

// jsonString reads the content of a JSON string, its opening quote read,
// up to its closing quote, for a base64 decoder.
type jsonString struct {
	br   *bufio.Reader
	done bool
}

func (s *jsonString) Read(b []byte) (int, error) {
	if s.done {
		return 0, io.EOF
	}
	if len(b) == 0 {
		return 0, nil
	}
	if s.br.Buffered() == 0 {
		if _, err := s.br.Peek(1); err != nil {
			return 0, noEOF(err)
		}
	}
	buf, _ := s.br.Peek(s.br.Buffered())
	i := bytes.IndexAny(buf, `"\`)
	switch {
	case i < 0:
		i = len(buf)
		fallthrough
	case i > 0:
		n := copy(b, buf[:i])
		_, _ = s.br.Discard(n)
		return n, nil
	case buf[0] == '"':
		_, _ = s.br.Discard(1)
		s.done = true
		return 0, io.EOF
	}
	esc, err := s.br.Peek(2)
	if err != nil {
		return 0, noEOF(err)
	}
	// Every escape is decoded as the JSON decoder did; the base64
	// decoder then refuses what is not base64 (it skips line breaks).
	var c byte
	switch esc[1] {
	case '"', '\\', '/':
		c = esc[1]
	case 'b':
		c = '\b'
	case 'f':
		c = '\f'
	case 'n':
		c = '\n'
	case 'r':
		c = '\r'
	case 't':
		c = '\t'
	case 'u':
		u, err := s.br.Peek(6)
		if err != nil {
			return 0, noEOF(err)
		}
		r, perr := strconv.ParseUint(string(u[2:]), 16, 16)
		if perr != nil {
			return 0, malformed("invalid escape %q in a code part's string", u)
		}
		b[0] = byte(r)
		if r >= utf8.RuneSelf {
			// Not base64: a byte that is not either stands for it.
			b[0] = '!'
		}
		_, _ = s.br.Discard(6)
		return 1, nil
	default:
		return 0, malformed("invalid escape \\%c in a code part's string", esc[1])
	}
	b[0] = c
	_, _ = s.br.Discard(2)
	return 1, nil
}
