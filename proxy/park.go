package proxy

import (
	"errors"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// parker watches the sockets of parked pairs: pairs quiet for ParkAfter
// whose goroutines have ended. A waiting goroutine costs a stack (4 to 8
// KiB once the runtime has sized it), two per pair; a parked pair costs
// only its sockets and its structs. One epoll instance, read by one
// goroutine, hands a pair back to Server.resume as soon as either of its
// sockets is readable or closed.
//
// Each socket is registered level-triggered and one-shot, with the pair's
// id (never reused) as its data: bytes that arrived while the pair was
// being parked are seen at once, a pair is resumed once however many of
// its sockets fire, and a stale registration can only name an id that is
// gone. A pair enters the map only once both its sockets are registered
// (park fails otherwise, and its caller ends it); whoever takes it out
// owns it: the loop (resume) or unpark (the sweeper or Close ending it).
type parker struct {
	resume func(*pair)

	mu      sync.Mutex
	pairs   map[uint64]*pair
	nextID  uint64
	epfd    int // -1 until the first park
	wakeFd  int // an eventfd that stops the loop
	stopped bool
	done    chan struct{} // closed when the loop has ended
}

// wakeID is the event data of the stop eventfd; pair ids start above it.
const wakeID = 0

func newParker(resume func(*pair)) *parker {
	return &parker{resume: resume, pairs: map[uint64]*pair{}, nextID: wakeID + 1, epfd: -1, wakeFd: -1}
}

// start makes the epoll instance and its loop (k.mu held).
func (k *parker) start() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	setID(&ev, wakeID)
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return err
	}
	k.epfd, k.wakeFd, k.done = epfd, wfd, make(chan struct{})
	go k.loop(epfd, wfd, k.done)
	return nil
}

func setID(ev *unix.EpollEvent, id uint64) {
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
}

func idOf(ev *unix.EpollEvent) uint64 { return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32 }

// park hands a pair whose goroutines have both paused to the loop, and
// says whether it did (false: the caller ends the pair).
func (k *parker) park(p *pair) bool {
	k.mu.Lock()
	if k.stopped || k.epfd < 0 && k.start() != nil {
		k.mu.Unlock()
		return false
	}
	defer k.mu.Unlock()
	id := k.nextID
	k.nextID++
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT}
	setID(&ev, id)
	// Under k.mu, as every epoll_ctl: the loop closes epfd under it too,
	// and a number closed and reused meanwhile could be another epoll
	// instance (the runtime's).
	for i, c := range []net.Conn{p.client, p.backend} {
		if err := register(k.epfd, c, &ev); err != nil {
			// Closed meanwhile (by the sweeper or Close): the caller ends it.
			if i == 1 {
				unregister(k.epfd, p.client)
			}
			return false
		}
	}
	p.parkID = id
	k.pairs[id] = p
	return true
}

// register adds c's socket to epfd, or re-arms a registration left from
// an earlier park.
func register(epfd int, c net.Conn, ev *unix.EpollEvent) error {
	rc, ok := rawConn(c)
	if !ok {
		return errors.ErrUnsupported
	}
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(fd), ev)
		if errors.Is(err, unix.EEXIST) {
			err = unix.EpollCtl(epfd, unix.EPOLL_CTL_MOD, int(fd), ev)
		}
	}); cerr != nil {
		return cerr
	}
	return err
}

// unregister removes c's socket from epfd (it may not be there).
func unregister(epfd int, c net.Conn) {
	if rc, ok := rawConn(c); ok {
		_ = rc.Control(func(fd uintptr) { _ = unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, int(fd), nil) })
	}
}

// take removes a parked pair from the map and from the epoll set, and
// says whether it was there (the caller then owns it).
func (k *parker) take(id uint64) *pair {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.pairs[id]
	if p == nil {
		return nil
	}
	delete(k.pairs, id)
	p.parkID = 0
	if k.epfd >= 0 {
		unregister(k.epfd, p.client)
		unregister(k.epfd, p.backend)
	}
	return p
}

// unpark takes p out of the parker if it is parked, and says whether it
// was (the caller then ends it: no goroutine runs it).
func (k *parker) unpark(p *pair) bool {
	k.mu.Lock()
	id := p.parkID
	k.mu.Unlock()
	return id != 0 && k.take(id) != nil
}

func (k *parker) loop(epfd, wakeFd int, done chan struct{}) {
	defer close(done)
	defer func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		unix.Close(epfd)
		unix.Close(wakeFd)
		k.epfd, k.wakeFd, k.stopped = -1, -1, true
	}()
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// Not expected; parked pairs are still ended by the sweeper
			// (idle timeout) and Close.
			return
		}
		for i := range n {
			id := idOf(&events[i])
			if id == wakeID {
				return
			}
			if p := k.take(id); p != nil {
				go k.resume(p)
			} // else its other socket fired first, or it was closed
		}
	}
}

// stop ends the loop; pairs parked after it are not (park fails), and
// those still parked are Close's to end.
func (k *parker) stop() {
	k.mu.Lock()
	k.stopped = true
	wfd, done := k.wakeFd, k.done
	k.mu.Unlock()
	if wfd < 0 {
		return
	}
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(wfd, one[:])
	<-done
}
