// Package park holds idle connections without a goroutine each: a parked
// value's sockets are watched by one epoll instance, read by one
// goroutine, which hands the value back (in a new goroutine) as soon as
// one of its sockets is readable, closed or in error. A goroutine waiting
// on a socket costs a stack (4 to 8 KiB once the runtime has sized it)
// that the garbage collector scans at every cycle; a parked value costs
// its sockets and an entry in a map.
//
// Each socket is registered level-triggered and one-shot, with the
// value's id (never reused) as its data: bytes that arrived while the
// value was being parked are seen at once, a value is resumed once
// however many of its sockets fire, and a stale registration can only
// name an id that is gone. A value enters the set only once all its
// sockets are registered (Park fails otherwise); whoever takes it out
// owns it: the loop (resume) or Unpark.
package park

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/gatewayhq/gateway/internal/quietnet"
	"golang.org/x/sys/unix"
)

// Set is a set of parked values (Linux; elsewhere Park always fails and
// callers keep their goroutines).
type Set[T comparable] struct {
	resume func(T)
	inline bool // resume runs on the loop's goroutine

	mu      sync.Mutex
	byID    map[uint64]entry[T]
	ids     map[T]uint64
	nextID  uint64
	epfd    int      // -1 until the first park
	ep      *os.File // epfd, waited on in the runtime's poller
	stopped bool
	done    chan struct{} // closed when the loop has ended
}

type entry[T any] struct {
	v     T
	conns []net.Conn
}

// New makes a set that calls resume, each time in a new goroutine, with
// a parked value whose socket fired.
func New[T comparable](resume func(T)) *Set[T] {
	return &Set[T]{resume: resume, byID: map[uint64]entry[T]{}, ids: map[T]uint64{}, nextID: 1, epfd: -1}
}

// NewInline makes a set that calls resume on its loop's goroutine, one
// value after another: resume must not block (it may park its value
// again), and a parked value then costs no goroutine even to resume.
func NewInline[T comparable](resume func(T)) *Set[T] {
	k := New(resume)
	k.inline = true
	return k
}

// Stopped is a set that parks nothing (a test's, or one made stopped).
func Stopped[T comparable]() *Set[T] {
	k := New[T](nil)
	k.stopped = true
	return k
}

// start makes the epoll instance and its loop (k.mu held). The loop
// waits for the instance in the runtime's poller (an epoll instance is
// readable when it has events), not in a blocking epoll_wait: a goroutine
// blocked in a system call has its P taken by the runtime's monitor
// thread, which then polls at its fastest for a while, at every wake-up.
// For the same reason every epoll call here is made without the
// runtime's syscall bookkeeping (none of them blocks; see
// internal/quietnet).
func (k *Set[T]) start() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return err
	}
	ep := os.NewFile(uintptr(epfd), "park-epoll")
	rc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		return err
	}
	k.epfd, k.ep, k.done = epfd, ep, make(chan struct{})
	go k.loop(ep, rc, k.done)
	return nil
}

// epollCtl is epoll_ctl(2) without entersyscall.
func epollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// epollReady is epoll_pwait(2) with no wait, without entersyscall.
func epollReady(epfd int, events []unix.EpollEvent) (int, error) {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)), 0, 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

func setID(ev *unix.EpollEvent, id uint64) {
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
}

func idOf(ev *unix.EpollEvent) uint64 { return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32 }

// Park hands v, whose goroutines are ending, to the loop until one of
// conns fires, and says whether it did (false: the set is stopped or a
// socket could not be registered, closed meanwhile for one; the caller
// keeps v). v must not be parked already.
func (k *Set[T]) Park(v T, conns ...net.Conn) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped || k.epfd < 0 && k.start() != nil {
		return false
	}
	id := k.nextID
	k.nextID++
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT}
	setID(&ev, id)
	// Under k.mu, as every epoll_ctl: the loop closes epfd under it too,
	// and a number closed and reused meanwhile could be another epoll
	// instance (the runtime's).
	for i, c := range conns {
		if err := register(k.epfd, c, &ev); err != nil {
			for _, done := range conns[:i] {
				unregister(k.epfd, done)
			}
			return false
		}
	}
	k.byID[id] = entry[T]{v: v, conns: conns}
	k.ids[v] = id
	return true
}

// register re-arms c's registration left from an earlier park (the
// common case: a value parked again and again), or adds c's socket to
// epfd.
func register(epfd int, c net.Conn, ev *unix.EpollEvent) error {
	rc, ok := quietnet.RawConn(c)
	if !ok {
		return errors.ErrUnsupported
	}
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = epollCtl(epfd, unix.EPOLL_CTL_MOD, int(fd), ev)
		if errors.Is(err, unix.ENOENT) {
			err = epollCtl(epfd, unix.EPOLL_CTL_ADD, int(fd), ev)
		}
	}); cerr != nil {
		return cerr
	}
	return err
}

// unregister removes c's socket from epfd (it may not be there).
func unregister(epfd int, c net.Conn) {
	if rc, ok := quietnet.RawConn(c); ok {
		_ = rc.Control(func(fd uintptr) { _ = epollCtl(epfd, unix.EPOLL_CTL_DEL, int(fd), &unix.EpollEvent{}) })
	}
}

// take removes a parked value from the set and from the epoll set, and
// says whether it was there (k.mu held; the caller then owns it). A
// value of one socket that fired keeps its registration, which one-shot
// disabled, for the next park to re-arm.
func (k *Set[T]) take(id uint64, fired bool) (T, bool) {
	e, ok := k.byID[id]
	if !ok {
		return e.v, false
	}
	delete(k.byID, id)
	delete(k.ids, e.v)
	if k.epfd >= 0 && !(fired && len(e.conns) == 1) {
		for _, c := range e.conns {
			unregister(k.epfd, c)
		}
	}
	return e.v, true
}

// Unpark takes v out of the set if it is parked, and says whether it was
// (the caller then owns it: no goroutine runs it, and resume will not).
func (k *Set[T]) Unpark(v T) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	id, ok := k.ids[v]
	if !ok {
		return false
	}
	_, ok = k.take(id, false)
	return ok
}

// Len is how many values are parked.
func (k *Set[T]) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.byID)
}

func (k *Set[T]) loop(ep *os.File, rc syscall.RawConn, done chan struct{}) {
	defer close(done)
	defer func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.ep == ep {
			ep.Close()
			k.epfd, k.ep, k.stopped = -1, nil, true
		}
	}()
	events := make([]unix.EpollEvent, 128)
	for {
		var n int
		var werr error
		err := rc.Read(func(fd uintptr) bool {
			n, werr = epollReady(int(fd), events)
			return werr != nil || n > 0 // else wait in the poller
		})
		if err != nil || werr != nil {
			// Stop closed the instance (or, not expected, it failed):
			// what is parked is its owners' to end.
			return
		}
		for i := range n {
			id := idOf(&events[i])
			k.mu.Lock()
			v, ok := k.take(id, true)
			k.mu.Unlock()
			switch {
			case !ok: // another of its sockets fired first, or it was unparked
			case k.inline:
				k.resume(v)
			default:
				go k.resume(v)
			}
		}
	}
}

// Stop ends the loop; values parked after it are not (Park fails), and
// those still parked are their owners' to end (Unpark).
func (k *Set[T]) Stop() {
	k.mu.Lock()
	k.stopped = true
	ep, done := k.ep, k.done
	if ep != nil {
		// Closed under k.mu, as epoll_ctl is made: a number closed and
		// reused meanwhile could be another epoll instance.
		ep.Close()
		k.epfd, k.ep = -1, nil
	}
	k.mu.Unlock()
	if ep != nil {
		<-done
	}
}
