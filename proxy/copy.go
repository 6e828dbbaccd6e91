package proxy

import (
	"errors"
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
func copyConn(dst, src net.Conn) error {
	rc, ok := rawConn(src)
	if !ok {
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

func rawConn(c net.Conn) (syscall.RawConn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	return rc, err == nil
}
