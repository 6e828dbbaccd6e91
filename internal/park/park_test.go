package park_test

import (
	"net"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/park"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// A parked value is handed back once, when its socket has something to
// read or closes (inline: on the loop's goroutine), and can be parked
// again; an unparked one is never handed back; a stopped set parks
// nothing.
func TestParkResumeUnpark(t *testing.T) {
	for _, inline := range []bool{false, true} {
		name := "goroutine"
		if inline {
			name = "inline"
		}
		t.Run(name, func(t *testing.T) {
			got := make(chan string, 10)
			resume := func(v string) { got <- v }
			k := park.New(resume)
			if inline {
				k = park.NewInline(resume)
			}
			defer k.Stop()
			a, b := testutil.MustTCPPair(t)
			c, d := testutil.MustTCPPair(t)
			if !k.Park("a", a) || !k.Park("c", c) || k.Len() != 2 {
				t.Fatalf("park: %d parked", k.Len())
			}
			expect := func(want string) {
				t.Helper()
				select {
				case v := <-got:
					if v != want {
						t.Fatalf("resumed %q, want %q", v, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%q not resumed", want)
				}
			}
			b.Write([]byte("x"))
			expect("a")
			buf := make([]byte, 1)
			if _, err := a.Read(buf); err != nil {
				t.Fatal(err)
			}
			if !k.Park("a", a) { // parked again: its registration re-armed
				t.Fatal("park again")
			}
			b.Write([]byte("y"))
			expect("a")
			if !k.Unpark("c") || k.Unpark("c") {
				t.Fatal("unpark c: want true once")
			}
			d.Write([]byte("z"))
			if !k.Park("a", a) {
				t.Fatal("park a")
			}
			b.Close() // a's peer closed: a is handed back
			expect("a")
			select {
			case v := <-got:
				t.Fatalf("%q resumed after it was unparked, or twice", v)
			case <-time.After(100 * time.Millisecond):
			}
			k.Stop()
			e, _ := testutil.MustTCPPair(t)
			if k.Park("e", e) {
				t.Fatal("a stopped set parked")
			}
			if park.Stopped[string]().Park("e", e) {
				t.Fatal("a set made stopped parked")
			}
			var notSocket net.Conn = struct{ net.Conn }{e}
			if park.New(resume).Park("n", notSocket) {
				t.Fatal("parked a connection without a socket")
			}
		})
	}
}
