package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
)

// copyBufSize is the pooled buffer one direction of a passthrough borrows
// while it moves bytes: large enough for bulk transfers to cost few
// syscalls, held only between a read and its write.
const copyBufSize = 64 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyConn copies src to dst until src ends, like io.Copy, but holds
// nothing while src is idle: it waits for src to be readable without a
// buffer, then borrows one from the pool for one read and its write.
// io.Copy between TCP connections would splice, which is copy-free but
// keeps a kernel pipe (two descriptors) per direction for as long as the
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
	for {
		// Wait without a buffer. Peeking, not just waiting, never misses
		// bytes already there (the poller is edge-triggered).
		if err := rc.Read(readable); err != nil {
			return err
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
