package health

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/store"
)

// The health watch, like the poll, streams only from a member presenting
// the cluster's own certificate; one that does not is left to the poll
// (which refuses it too).
func TestHealthWatchVerifiesClusterCert(t *testing.T) {
	certA, certB := testutil.ClusterCert(t, "ca"), testutil.ClusterCert(t, "cb")
	urlA := testutil.CountsMember(t, "ca", certA)
	urlB := testutil.CountsMember(t, "cb", certA) // cb's address, but a member with ca's certificate
	got := make(chan string, 10)
	p := newWatchPool(time.Second, time.Second, func(cluster string, c *Counts, _ bool) {
		if c != nil {
			got <- fmt.Sprintf("%s %d busy=%v", cluster, c.Workers, c.Busy())
		}
	}, func(cluster string, err error) { got <- cluster + " ended: " + err.Error() })
	p.run(t.Context())
	t.Cleanup(p.wg.Wait)
	a := p.ensure(&store.Cluster{Name: "ca", DashboardAddress: urlA, TLSCert: certA.CertPEM})
	select {
	case line := <-got:
		if line != "ca 3 busy=true" {
			t.Fatalf("own member: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no counts from the cluster's own member")
	}
	if a.State() != Live || a.workers.Load() != 3 || !a.busy.Load() {
		t.Errorf("own member: state %d, workers %d, busy %v", a.State(), a.workers.Load(), a.busy.Load())
	}
	// A server that answers 200 to any path, with a body that ends.
	anyPath := testutil.ServeTLS(t, certA, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"workers": 3, "desired_workers": 3, "processing": 0, "waiting": 0, "clients": 1}`)
	}))
	for name, cl := range map[string]*store.Cluster{
		"another cluster's certificate": {Name: "cb", DashboardAddress: urlB, TLSCert: certB.CertPEM},
		"no certificate":                {Name: "cn", DashboardAddress: urlA},
		"not a stream":                  {Name: "ca2", DashboardAddress: anyPath.URL, TLSCert: certA.CertPEM},
	} {
		w := p.ensure(cl)
		deadline := time.Now().Add(10 * time.Second)
		for w.State() == Dialing && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if w.State() != Unsupported {
			t.Errorf("%s: state %d, want it left to the poll", name, w.State())
		}
	}
	select {
	case line := <-got:
		t.Errorf("a watch that never streamed told: %q", line)
	default:
	}
	p.drop("ca")
	if a.State() != Live {
		t.Errorf("a dropped watch changed state to %d", a.State())
	}
}

// A watch's connection has the kernel probe the scheduler's host (TCP
// keepalive within the heartbeat timeout: no heartbeat says a host is
// gone any more), and asks the preload to end the stream when its event
// loop blocks for a third of the timeout.
func TestWatchKeepAliveAndStall(t *testing.T) {
	cert := testutil.ClusterCert(t, "ca")
	asked := make(chan string, 1)
	srv := testutil.ServeTLS(t, cert, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- r.URL.RawQuery:
		default:
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"workers": 1}`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	p := newWatchPool(30*time.Second, 5*time.Minute, func(string, *Counts, bool) {}, func(string, error) {})
	if p.lostAfter > 30*time.Second || p.lostAfter < 10*time.Second {
		t.Errorf("a lost host is found after %s, want within the 30s timeout", p.lostAfter)
	}
	cl := &store.Cluster{Name: "ca", DashboardAddress: srv.URL, TLSCert: cert.CertPEM}
	e := newCountsEntry(cl)
	conn, err := e.dialKeepAlive(t.Context(), time.Now().Add(10*time.Second), p.keepAlive)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*tls.Conn).NetConn().(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	if err := raw.Control(func(fd uintptr) {
		for name, opt := range map[string][2]int{
			"SO_KEEPALIVE": {syscall.SOL_SOCKET, syscall.SO_KEEPALIVE}, "TCP_KEEPIDLE": {syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE},
			"TCP_KEEPINTVL": {syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL}, "TCP_KEEPCNT": {syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT},
		} {
			v, err := syscall.GetsockoptInt(int(fd), opt[0], opt[1])
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			got[name] = v
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 10, "TCP_KEEPINTVL": 5, "TCP_KEEPCNT": 2}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	if _, err := conn.Write(e.watchRequest(p.beat, p.stall)); err != nil {
		t.Fatal(err)
	}
	select {
	case q := <-asked:
		if q != "beat=300&stall=10" {
			t.Errorf("watch asked with %q, want beat=300&stall=10", q)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch request did not arrive")
	}
}

// The heartbeat clock after a stream ends: an end (the scheduler's
// process died, or its loop blocked) is when it was last known there;
// keepalive's timeout dates from before the kernel's probes.
func TestWatchEndedAt(t *testing.T) {
	p := newWatchPool(30*time.Second, 5*time.Minute, nil, nil)
	now := time.Now()
	for _, c := range []struct {
		name string
		err  error
		want time.Time
	}{
		{"eof", errWatchEOF, now},
		{"reset", fmt.Errorf("watch: %w", syscall.ECONNRESET), now},
		{"keepalive", fmt.Errorf("watch: read: %w", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}), now.Add(-20 * time.Second)},
	} {
		if got := p.endedAt(now, c.err); !got.Equal(c.want) {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// A live stream waits parked (no goroutine) between lines, over TLS:
// each line wakes it, is read whole however the bytes arrive, and the
// scheduler ending the stream while it is parked is seen at once.
func TestWatchParksBetweenLines(t *testing.T) {
	cert := testutil.ClusterCert(t, "ca")
	send := make(chan string)
	srv := testutil.ServeTLS(t, cert, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			var s string
			select {
			case s = <-send:
			case <-r.Context().Done():
				return
			}
			if s == "end" {
				return
			}
			fmt.Fprint(w, s)
			w.(http.Flusher).Flush()
		}
	}))
	got := make(chan string, 10)
	p := newWatchPool(30*time.Second, 5*time.Minute, func(cluster string, c *Counts, wasBusy bool) {
		got <- fmt.Sprintf("%d busy=%v was=%v", c.Workers, c.Busy(), wasBusy)
	}, func(cluster string, err error) { got <- "ended: " + err.Error() })
	p.run(t.Context())
	t.Cleanup(p.wg.Wait)
	w := p.ensure(&store.Cluster{Name: "ca", DashboardAddress: srv.URL, TLSCert: cert.CertPEM})
	waitParked := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for p.parked.Len() != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("not parked %s (state %d)", what, w.State())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	expect := func(want string) {
		t.Helper()
		select {
		case line := <-got:
			if line != want {
				t.Fatalf("got %q, want %q", line, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing, want %q", want)
		}
	}
	waitParked("after the head")
	send <- `{"workers": 2, "processing": 1}` + "\n"
	expect("2 busy=true was=false")
	waitParked("after a line")
	send <- `{"workers": 2,` // half a line: read, and parked again
	waitParked("inside a line")
	send <- ` "processing": 0}` + "\n\n" // the rest, and a heartbeat
	expect("2 busy=false was=true")
	waitParked("after a heartbeat")
	heard := w.heard.Load()
	send <- "\n"
	deadline := time.Now().Add(10 * time.Second)
	for w.heard.Load() == heard && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if w.heard.Load() == heard {
		t.Fatal("a heartbeat to a parked stream was not heard")
	}
	waitParked("after the heartbeat")
	send <- "end"
	expect("ended: " + errWatchEOF.Error())
	if p.parked.Len() != 0 || w.State() == Live { // ended, or, this soon after it began, polled
		t.Errorf("after the end: %d parked, state %d", p.parked.Len(), w.State())
	}
}

// The stream's body is decoded by hand (a parked read times out, which
// net/http's chunked reader would keep as its error): chunks split
// anywhere, extensions, the last chunk, and what is refused.
func TestWatchBodyDecoding(t *testing.T) {
	for _, c := range []struct {
		name, in string
		chunked  bool
		lines    []string
		err      string
	}{
		{"chunked", "5\r\n\n{\"wo\r\nc;x=y\r\nrkers\": 1}\n\r\n", true, []string{"\n", "{\"workers\": 1}\n"}, ""},
		{"last chunk", "1\r\n\n\r\n0\r\n\r\n", true, []string{"\n"}, "ended the stream"},
		{"upper hex, a flood", "1A\r\n" + strings.Repeat("\n", 26) + "\r\n", true, nil, "more than 20 lines"},
		{"bad size", "zz\r\n", true, nil, "bad chunk size"},
		{"huge size", "fffffffffffff\r\n", true, nil, "bad chunk size"},
		{"not chunked", "\n{\"workers\": 3}\n", false, []string{"\n", "{\"workers\": 3}\n"}, ""},
		{"long line", strings.Repeat("x", watchMaxLine+1), false, nil, "longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var lines []string
			p := newWatchPool(30*time.Second, 5*time.Minute, func(_ string, sc *Counts, _ bool) {
				lines = append(lines, fmt.Sprintf("{\"workers\": %d}\n", sc.Workers))
			}, nil)
			w := &Watch{name: "c"}
			w.body.chunked = c.chunked
			var err error
			// One byte at a time: every state boundary is a read boundary.
			for i := 0; i < len(c.in) && err == nil; i++ {
				seen, counts := w.inWindow, len(lines)
				err = p.take(w, []byte{c.in[i]})
				if w.inWindow > seen && len(lines) == counts {
					lines = append(lines, "\n") // a heartbeat
				}
			}
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
			if c.err == "" && fmt.Sprint(lines) != fmt.Sprint(c.lines) {
				t.Errorf("lines %q, want %q", lines, c.lines)
			}
		})
	}
}
