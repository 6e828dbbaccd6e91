package wheel

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"testing"
)

// BenchmarkWriteLayer installs a 2000-file wheel of 16 MiB (deflated
// pseudo-random text) into a layer.
func BenchmarkWriteLayer(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	var files []zent
	for i := 0; i < 2000; i++ {
		buf := make([]byte, 8<<10)
		for j := range buf {
			buf[j] = byte('a' + rng.Intn(16))
		}
		files = append(files, zent{name: fmt.Sprintf("big/m%03d/f%04d.py", i/100, i), data: string(buf)})
	}
	fn := "big-1.0-py3-none-any.whl"
	data := makeWheel(b, fn, files, wheelOpts{})
	b.SetBytes(2000 * 8 << 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := WriteLayer(bytes.NewReader(data), int64(len(data)), fn, testLayout, Limits{}, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
