package proxy

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// The proxy's reads and writes on sockets are made without the runtime's
// syscall bookkeeping (entersyscall/exitsyscall, which syscall.Read and
// net.Conn do): on a non-blocking socket they never block, so the
// bookkeeping's one job (handing the P to another thread while the call
// blocks) never applies, and it costs a context switch per burst of work:
// entersyscall wakes the runtime's monitor thread (sysmon) whenever every
// P was idle, which for a proxy that waits between messages is every
// message or request. On two cores that wake-up is a futex call, a thread
// switch that competes with the proxy's own, and often a preemption of
// the very thread carrying the message (measured with perf sched on
// figures 2 and 4; golang/go#18236 is the runtime's side). Waiting for
// readiness still goes through the poller, under the connection's
// deadlines.

// rawRead is read(2) on a non-blocking socket, without entersyscall.
func rawRead(fd int, p []byte) (int, error) {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return -1, e
	}
}

// rawWriter is a Write for the socket behind wc with write(2) made as
// rawRead's read: it writes all of p, waiting in the poller (under the
// socket's write deadline) while the socket's buffer is full. Its calls
// must not overlap; it reuses one closure for every write.
func rawWriter(wc syscall.RawConn) func(p []byte) (int, error) {
	var (
		rest []byte
		done int
		werr error
	)
	write := func(fd uintptr) bool {
		for len(rest) > 0 {
			n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(rest))), uintptr(len(rest)))
			switch e {
			case 0:
				rest, done = rest[n:], done+int(n)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until the socket takes more
			default:
				werr = os.NewSyscallError("write", e)
				return true
			}
		}
		return true
	}
	return func(p []byte) (int, error) {
		rest, done, werr = p, 0, nil
		err := wc.Write(write)
		rest = nil
		if err == nil {
			err = werr
		}
		return done, err
	}
}

// quietConn is a TCP connection whose Read and Write are rawRead and
// rawWriter: for the HTTP side (dashboards and the API behind the
// proxy's listener, and the dashboard proxy's connections to
// schedulers), whose reads and writes net/http makes on its own.
// Everything else (deadlines, Close, addresses) is the TCP connection's.
type quietConn struct {
	*net.TCPConn
	rc syscall.RawConn

	rmu    sync.Mutex // Read's state, one Read at a time (as net.Conn's)
	rbuf   []byte
	rn     int
	rerr   error
	readFn func(fd uintptr) bool

	wmu   sync.Mutex // one Write at a time
	write func(p []byte) (int, error)
}

// quiet wraps a TCP connection as a quietConn; any other connection is
// returned as it is.
func quiet(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	q := &quietConn{TCPConn: tc, rc: rc, write: rawWriter(rc)}
	q.readFn = q.readOnce
	return q
}

// readOnce is the poller's read attempt: false asks it to wait.
func (c *quietConn) readOnce(fd uintptr) bool {
	c.rn, c.rerr = rawRead(int(fd), c.rbuf)
	return c.rerr != syscall.EAGAIN
}

func (c *quietConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf = p
	err := c.rc.Read(c.readFn)
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, err // closed, or the deadline
	case c.rerr != nil:
		return 0, os.NewSyscallError("read", c.rerr)
	case c.rn == 0:
		return 0, io.EOF
	}
	return c.rn, nil
}

func (c *quietConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.write(p)
}

// ReadFrom and WriteTo stay io.Copy's plain loop over Read and Write
// (the TCP connection's would splice through entersyscall).
func (c *quietConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(onlyWriter{c}, r) }
func (c *quietConn) WriteTo(w io.Writer) (int64, error)  { return io.Copy(w, onlyReader{c}) }

type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

// quietDial is dialer's DialContext, its TCP connections made quiet.
func quietDial(dialer *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return quiet(c), nil
	}
}
