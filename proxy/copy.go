package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gatewayhq/gateway/internal/quietnet"
	"golang.org/x/sys/unix"
)

// copyBufSize is the pooled buffer one direction of a passthrough borrows
// for one read and its write: a whole TLS record (16 KiB of plaintext and
// its overhead) fits. A read that fills it is a bulk transfer, whose rest
// is spliced.
const copyBufSize = 16<<10 + 512

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyConn copies src to dst until src ends, like io.Copy, but holds
// nothing while src is idle: each read borrows a pooled buffer inside the
// poller's readiness check and gives it back when there is nothing to
// read, so a waiting direction holds no buffer and no pipe, and a small
// message costs one read and one write (no peek, no splice). A read that
// fills the buffer is a bulk transfer: what is waiting behind it is
// spliced between TCP connections, without a copy through user space.
// io.Copy between TCP connections splices too, but blocks in splice
// holding a kernel pipe (two descriptors) per direction for as long as the
// connection is open, and a gateway holds mostly idle connections.
// onData, when not nil, is called each time src has something to read,
// before it is passed on: it must be cheap (an atomic stamp). waiting,
// when not nil, is true while copyConn waits for src (the sweeper parks
// pairs whose two directions both wait).
func copyConn(dst, src net.Conn, onData func(), waiting *atomic.Bool) error {
	rc, ok := quietnet.RawConn(src)
	if !ok {
		if onData != nil {
			src = &activityConn{Conn: src, onData: onData}
		}
		_, err := io.Copy(dst, src)
		return err
	}
	// Made once per copy: a closure made per read would be an allocation
	// per message.
	var (
		bp   *[]byte
		n    int
		rerr error
	)
	read := func(fd uintptr) bool {
		bp = copyBufs.Get().(*[]byte)
		n, rerr = quietnet.Read(int(fd), *bp)
		if rerr == syscall.EAGAIN {
			copyBufs.Put(bp)
			bp = nil
			return false
		}
		return true
	}
	write := dst.Write
	if wc, ok := quietnet.RawConn(dst); ok {
		write = quietnet.Writer(wc)
	}
	tcpDst, _ := dst.(*net.TCPConn)
	lr := &io.LimitedReader{R: src}
	var avail int
	fionread := func(fd uintptr) {
		n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
		if err != nil {
			n = 0
		}
		avail = n
	}
	for {
		if waiting != nil {
			waiting.Store(true)
		}
		err := rc.Read(read)
		if waiting != nil {
			waiting.Store(false)
		}
		if err != nil {
			return err
		}
		got, full := max(n, 0), n == len(*bp)
		var werr error
		if got > 0 {
			if onData != nil {
				onData()
			}
			_, werr = write((*bp)[:got])
		}
		copyBufs.Put(bp)
		bp = nil
		switch {
		case werr != nil:
			return werr
		case rerr != nil:
			return os.NewSyscallError("read", rerr)
		case got == 0:
			return nil // the end of the stream
		}
		if full && tcpDst != nil {
			// Between TCP connections the bytes already waiting are
			// spliced: no copy through user space, and the kernel pipe
			// splice needs is the pool's again as soon as they are moved.
			for rc.Control(fionread) == nil && avail > 0 {
				lr.N = int64(avail)
				if _, err := tcpDst.ReadFrom(lr); err != nil {
					return err
				}
			}
		}
	}
}

// copyInspecting copies src to dst like copyConn while in watches the
// bytes, and returns finished once in is done (the caller goes on with
// copyConn), or when src ends (nil) or fails. Bytes in wants to see are
// peeked into a small array and then spliced; the rest is spliced unseen:
// no buffer is borrowed, which under a flood of handshakes would mean
// allocating.
func copyInspecting(dst, src net.Conn, onData func(), in inspector) (finished bool, err error) {
	rc, ok := quietnet.RawConn(src)
	tcpDst, isTCP := dst.(*net.TCPConn)
	if !ok || !isTCP {
		return copyInspectingSlow(dst, src, onData, in)
	}
	var one [1]byte
	readable := func(fd uintptr) bool {
		_, _, e := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return e != syscall.EAGAIN && e != syscall.EINTR
	}
	var small [8]byte
	var avail, want, peeked int
	fionread := func(fd uintptr) {
		n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
		if err != nil {
			n = 0
		}
		avail = n
	}
	peek := func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), small[:want], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err != nil {
			n = 0
		}
		peeked = n
	}
	lr := &io.LimitedReader{R: src}
	for !in.done() {
		if err := rc.Read(readable); err != nil {
			return false, err
		}
		if onData != nil {
			onData()
		}
		if rc.Control(fionread) != nil || avail == 0 {
			// The end of the stream or an error: a read says which.
			var b [1]byte
			n, err := src.Read(b[:])
			if n > 0 {
				if _, werr := dst.Write(b[:n]); werr != nil {
					return false, werr
				}
				in.saw(b[:n])
				continue
			}
			if errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, err
		}
		n, see := in.next()
		n = min(n, avail)
		if see {
			want = min(n, len(small))
			if err := rc.Control(peek); err != nil || peeked <= 0 {
				return false, fmt.Errorf("proxy: peek: %w", errors.Join(err, io.ErrUnexpectedEOF))
			}
			n = peeked
		}
		lr.N = int64(n)
		_, err := tcpDst.ReadFrom(lr)
		moved := n - int(lr.N)
		if see {
			in.saw(small[:moved])
		} else {
			in.skipped(moved)
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// copyInspectingSlow is copyInspecting through a buffer, for connections
// that cannot be spliced (tests over pipes).
func copyInspectingSlow(dst, src net.Conn, onData func(), in inspector) (bool, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	for !in.done() {
		n, err := src.Read((*bp)[:1]) // byte by byte: nothing past the handshake is read here
		if n > 0 {
			if onData != nil {
				onData()
			}
			if _, werr := dst.Write((*bp)[:n]); werr != nil {
				return false, werr
			}
			in.saw((*bp)[:n])
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// inspector watches a stream's bytes as copyConn passes them on. It asks
// to see only some of them: next says how many bytes come before it wants
// to look again (at most n), and whether it must see them (saw) or only
// count them (skipped), so that copyConn can splice the rest unseen.
type inspector interface {
	next() (n int, see bool)
	saw(b []byte)
	skipped(n int)
	done() bool
}

// activityConn reports reads, for copies that are not spliced.
type activityConn struct {
	net.Conn
	onData func()
}

func (c *activityConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.onData()
	}
	return n, err
}
