package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// copyBufSize is the pooled buffer one direction of a passthrough borrows
// while it moves bytes: large enough for bulk transfers to cost few
// syscalls, held only between a read and its write.
const copyBufSize = 64 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyConn copies src to dst until src ends, like io.Copy, but holds
// nothing while src is idle: it waits for src to be readable without a
// buffer or pipe, then splices the bytes that are there (between TCP
// connections) or borrows a pooled buffer for one read and its write.
// io.Copy between TCP connections splices too, but blocks in splice
// holding a kernel pipe (two descriptors) per direction for as long as the
// connection is open, and a gateway holds mostly idle connections: 10,000
// of them would need 60,000 descriptors instead of 20,000.
// onData, when not nil, is called each time src has something to read,
// before it is passed on: it must be cheap (an atomic stamp).
// This function's frame is part of every idle connection's stack: keep it
// small (copyInspecting is the heavier variant for the handshake).
func copyConn(dst, src net.Conn, onData func()) error {
	rc, ok := rawConn(src)
	if !ok {
		if onData != nil {
			src = &activityConn{Conn: src, onData: onData}
		}
		_, err := io.Copy(dst, src)
		return err
	}
	// Made once per connection: a closure made per wait would be an
	// allocation per read.
	var one [1]byte
	readable := func(fd uintptr) bool {
		// Data, the end of the stream or an error: the read says which.
		_, _, e := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return e != syscall.EAGAIN && e != syscall.EINTR
	}
	// Between TCP connections the bytes already waiting are spliced: no
	// copy through user space, and the kernel pipe splice needs is the
	// pool's again as soon as they are moved.
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
		// Wait without a buffer. Peeking, not just waiting, never misses
		// bytes already there (the poller is edge-triggered).
		if err := rc.Read(readable); err != nil {
			return err
		}
		if onData != nil {
			onData()
		}
		if tcpDst != nil {
			if rc.Control(fionread) == nil && avail > 0 {
				lr.N = int64(avail)
				if _, err := tcpDst.ReadFrom(lr); err != nil {
					return err
				}
				continue
			}
		}
		bp := copyBufs.Get().(*[]byte)
		n, rerr := src.Read(*bp)
		var werr error
		if n > 0 {
			_, werr = dst.Write((*bp)[:n])
		}
		copyBufs.Put(bp)
		switch {
		case werr != nil:
			return werr
		case errors.Is(rerr, io.EOF):
			return nil
		case rerr != nil:
			return rerr
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
	rc, ok := rawConn(src)
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

func rawConn(c net.Conn) (syscall.RawConn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	return rc, err == nil
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
