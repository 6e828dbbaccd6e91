// Package quietnet reads and writes sockets without the runtime's
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
// deadlines. The proxy's connections and the health watches of
// schedulers (scheduler/watch.go) use it.
package quietnet

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Read is read(2) on a non-blocking socket, without entersyscall.
func Read(fd int, p []byte) (int, error) {
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

// Writer is a Write for the socket behind wc with write(2) made as
// Read's read: it writes all of p, waiting in the poller (under the
// socket's write deadline) while the socket's buffer is full. Its calls
// must not overlap; it reuses one closure for every write.
func Writer(wc syscall.RawConn) func(p []byte) (int, error) {
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

// Conn is a TCP connection whose Read and Write are Read and Writer:
// for connections whose reads and writes another package makes (net/http
// for the dashboards and the API behind the proxy's listener, and the
// dashboard proxy's connections to schedulers; crypto/tls).
// Everything else (deadlines, Close, addresses) is the TCP connection's.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	nonblock atomic.Bool // Read returns at once (SetNonblocking)

	rmu    sync.Mutex // Read's state, one Read at a time (as net.Conn's)
	rbuf   []byte
	rn     int
	rerr   error
	readFn func(fd uintptr) bool

	wmu   sync.Mutex // one Write at a time
	write func(p []byte) (int, error)
}

// Wrap wraps a TCP connection as a Conn; any other connection is
// returned as it is.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	q := &Conn{TCPConn: tc, rc: rc, write: Writer(rc)}
	q.readFn = q.readOnce
	return q
}

// SetNonblocking makes Read return at once: with what the socket holds,
// or, when it holds nothing, with os.ErrDeadlineExceeded (a net.Error
// that is a Timeout and Temporary, which crypto/tls passes on without
// failing the connection), instead of waiting in the poller; deadlines
// then do not apply to reads. For a reader that waits for readiness
// elsewhere (internal/park).
func (c *Conn) SetNonblocking(on bool) { c.nonblock.Store(on) }

func (c *Conn) readNow(fd uintptr) { c.rn, c.rerr = Read(int(fd), c.rbuf) }

// readOnce is the poller's read attempt: false asks it to wait.
func (c *Conn) readOnce(fd uintptr) bool {
	c.rn, c.rerr = Read(int(fd), c.rbuf)
	return c.rerr != syscall.EAGAIN
}

func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf = p
	var err error
	if c.nonblock.Load() {
		err = c.rc.Control(c.readNow)
		if err == nil && c.rerr == syscall.EAGAIN {
			c.rbuf = nil
			return 0, os.ErrDeadlineExceeded
		}
	} else {
		err = c.rc.Read(c.readFn)
	}
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

func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.write(p)
}

// ReadFrom and WriteTo stay io.Copy's plain loop over Read and Write
// (the TCP connection's would splice through entersyscall).
func (c *Conn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(onlyWriter{c}, r) }
func (c *Conn) WriteTo(w io.Writer) (int64, error)  { return io.Copy(w, onlyReader{c}) }

type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

// Dial is dialer's DialContext, its TCP connections made quiet.
func Dial(dialer *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Wrap(c), nil
	}
}

// RawConn is c's syscall.RawConn, if c has a socket.
func RawConn(c net.Conn) (syscall.RawConn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	return rc, err == nil
}
