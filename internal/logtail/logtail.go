// Package logtail reads the ends of members' logs in bounded memory, for
// the providers that keep logs in files.
package logtail

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
)

// ReadEnd returns the last max bytes of a file (from a line start), and
// whether anything before them was left out. A file that cannot be read
// reads as empty.
func ReadEnd(path string, max int64) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false
	}
	if max <= 0 {
		return "", st.Size() > 0
	}
	off := max64(st.Size()-max, 0)
	b := make([]byte, st.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false
	}
	b = b[:n]
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:] // the first line may be cut
		}
	}
	return string(b), off > 0
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// LastLines splits text into lines and keeps the last n (all when n <= 0).
func LastLines(text string, n int) []string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
