package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// frontHandler answers the front's tests: /clusters/c/<what> chooses the
// answer; anything else says who it is and whether it came over TLS.
func frontHandler(release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what, ok := strings.CutPrefix(r.URL.Path, DashboardPrefix+"c/")
		if !ok {
			fmt.Fprintf(w, "api tls=%t", r.TLS != nil)
			return
		}
		switch what {
		case "small":
			_, _ = io.WriteString(w, "hello")
		case "big":
			for i := range 3 {
				_, _ = io.WriteString(w, strings.Repeat(string(rune('a'+i)), 4000))
			}
		case "length":
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "0123456789")
			if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrContentLength) {
				panic(fmt.Sprintf("a write past Content-Length: %v", err))
			}
		case "short":
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "01234")
		case "notmodified":
			w.WriteHeader(http.StatusNotModified)
			if _, err := io.WriteString(w, "body"); !errors.Is(err, http.ErrBodyNotAllowed) {
				panic(fmt.Sprintf("a body on 304: %v", err))
			}
		case "flush":
			_, _ = io.WriteString(w, "first")
			_ = http.NewResponseController(w).Flush()
			<-release
			_, _ = io.WriteString(w, "second")
		case "panic":
			panic("boom")
		case "abort":
			_, _ = io.WriteString(w, strings.Repeat("x", 10000))
			panic(http.ErrAbortHandler)
		case "trailer":
			w.Header().Set("Trailer", "X-Sum")
			_, _ = io.WriteString(w, "body")
			w.Header().Set("X-Sum", "42")
			w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
		case "context":
			local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
			_, isServer := r.Context().Value(http.ServerContextKey).(*http.Server)
			sni := ""
			if r.TLS != nil {
				sni = r.TLS.ServerName
			}
			fmt.Fprintf(w, "server=%t local=%t remote=%t tls=%t sni=%s host=%s uri=%s", isServer, local != nil,
				strings.HasPrefix(r.RemoteAddr, "127.0.0.1:"), r.TLS != nil, sni, r.Host, r.RequestURI)
		case "wait":
			<-release
			_, _ = io.WriteString(w, "done")
		default:
			http.NotFound(w, r)
		}
	})
}

func startFront(t *testing.T, release <-chan struct{}, adjust ...func(*http.Server)) (*harness, *tls.Config) {
	t.Helper()
	gwTLS, pool := gatewayCert(t)
	h := startProxy(t, Config{TLS: gwTLS, AllowPlainHTTP: true}, nil, func(*Server) http.Handler { return frontHandler(release) }, adjust...)
	return h, &tls.Config{ServerName: "gateway.test", RootCAs: pool}
}

// roundTrip writes raw to a new connection and reads one answer.
func roundTrip(t *testing.T, addr, raw string) (*http.Response, string, error) {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// Which requests the front answers, and which it hands to net/http; those
// must get net/http's answer, as if the front were not there.
func TestFrontRouting(t *testing.T) {
	h, _ := startFront(t, nil)
	long := strings.Repeat("k", frontHeadMax)
	for _, tc := range []struct {
		name, raw string
		front     bool
		status    int
		body      string
	}{
		{"dashboard GET", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\n\r\n", true, 200, "hello"},
		{"dashboard HEAD", "HEAD /clusters/c/small HTTP/1.1\r\nHost: gw\r\n\r\n", true, 200, ""},
		{"bare line feeds", "GET /clusters/c/small HTTP/1.1\nHost: gw\n\n", true, 200, "hello"},
		{"API", "GET /api/x HTTP/1.1\r\nHost: gw\r\n\r\n", false, 200, "api tls=false"},
		{"with a body", "POST /clusters/c/small HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\nabc", false, 200, "hello"},
		{"GET with a body", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\nabc", false, 200, "hello"},
		{"chunked GET", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false, 200, "hello"},
		{"upgrade", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", false, 200, "hello"},
		{"expect", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\n\r\n", false, 200, "hello"},
		{"HTTP/1.0", "GET /clusters/c/small HTTP/1.0\r\nHost: gw\r\n\r\n", false, 200, "hello"},
		{"absolute form", "GET http://gw/clusters/c/small HTTP/1.1\r\nHost: gw\r\n\r\n", false, 200, "hello"},
		{"head over the front's limit", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nCookie: a=" + long + "\r\n\r\n", false, 200, "hello"},
		{"two Host headers", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nHost: other\r\n\r\n", false, 400, ""},
		{"no Host", "GET /clusters/c/small HTTP/1.1\r\n\r\n", false, 400, ""},
		{"bad Host", "GET /clusters/c/small HTTP/1.1\r\nHost: g w\r\n\r\n", false, 400, ""},
		{"control byte in a value", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nX-A: a\x01b\r\n\r\n", false, 400, ""},
		{"bad header name", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nX A: b\r\n\r\n", false, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.srv.front.served.Load()
			resp, body, err := roundTrip(t, h.addr, tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if served := h.srv.front.served.Load() - before; served != map[bool]int64{true: 1, false: 0}[tc.front] {
				t.Errorf("front answered %d requests, want front=%t", served, tc.front)
			}
			if resp.StatusCode != tc.status || (tc.body != "" && body != tc.body) {
				t.Errorf("got %s %q, want %d %q", resp.Status, body, tc.status, tc.body)
			}
		})
	}
}

// The answers the front writes: framing, sniffing, errors, trailers.
func TestFrontAnswers(t *testing.T) {
	h, _ := startFront(t, nil)
	get := func(t *testing.T, method, what string) (*http.Response, string, error) {
		return roundTrip(t, h.addr, method+" /clusters/c/"+what+" HTTP/1.1\r\nHost: gw\r\n\r\n")
	}
	t.Run("small answer gets a length, a sniffed type and a date", func(t *testing.T) {
		resp, body, err := get(t, "GET", "small")
		if err != nil || body != "hello" || resp.ContentLength != 5 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
			resp.Header.Get("Date") == "" || len(resp.TransferEncoding) != 0 {
			t.Fatalf("%v %q %+v", err, body, resp)
		}
	})
	t.Run("HEAD has the length and no body", func(t *testing.T) {
		c := dialRaw(t, h.addr)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(ioTimeout))
		// Two in a row: a body sent for HEAD would be read as the second answer.
		_, _ = io.WriteString(c, "HEAD /clusters/c/small HTTP/1.1\r\nHost: gw\r\n\r\nGET /clusters/c/small HTTP/1.1\r\nHost: gw\r\n\r\n")
		br := bufio.NewReader(c)
		head, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
		if err != nil || head.ContentLength != 5 {
			t.Fatalf("HEAD: %v %+v", err, head)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "hello" {
			t.Fatalf("the answer after HEAD: %q", b)
		}
	})
	t.Run("long answer is chunked", func(t *testing.T) {
		resp, body, err := get(t, "GET", "big")
		want := strings.Repeat("a", 4000) + strings.Repeat("b", 4000) + strings.Repeat("c", 4000)
		if err != nil || body != want || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Fatalf("%v %d bytes %v", err, len(body), resp.TransferEncoding)
		}
	})
	t.Run("handler's length", func(t *testing.T) {
		resp, body, err := get(t, "GET", "length")
		if err != nil || body != "0123456789" || resp.ContentLength != 10 {
			t.Fatalf("%v %q %d", err, body, resp.ContentLength)
		}
	})
	t.Run("fewer bytes than the length: the connection ends", func(t *testing.T) {
		_, body, err := get(t, "GET", "short")
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%q %v, want an unexpected EOF", body, err)
		}
	})
	t.Run("304 has no body", func(t *testing.T) {
		resp, body, err := get(t, "GET", "notmodified")
		if err != nil || resp.StatusCode != 304 || body != "" {
			t.Fatalf("%v %+v %q", err, resp, body)
		}
	})
	t.Run("panic ends the connection without an answer", func(t *testing.T) {
		if resp, _, err := get(t, "GET", "panic"); err == nil {
			t.Fatalf("got an answer: %s", resp.Status)
		}
	})
	t.Run("aborted answer does not look whole", func(t *testing.T) {
		_, body, err := get(t, "GET", "abort")
		if err == nil {
			t.Fatalf("whole answer of %d bytes", len(body))
		}
	})
	t.Run("trailers", func(t *testing.T) {
		resp, body, err := get(t, "GET", "trailer")
		if err != nil || body != "body" || resp.Trailer.Get("X-Sum") != "42" || resp.Trailer.Get("X-Late") != "yes" || resp.Header.Get("X-Late") != "" {
			t.Fatalf("%v %q header %v trailer %v", err, body, resp.Header, resp.Trailer)
		}
	})
	t.Run("request as net/http makes it", func(t *testing.T) {
		_, body, err := get(t, "GET", "context?q=1")
		if want := "server=true local=true remote=true tls=false sni= host=gw uri=/clusters/c/context?q=1"; err != nil || body != want {
			t.Fatalf("%v %q, want %q", err, body, want)
		}
	})
	t.Run("Connection: close", func(t *testing.T) {
		c := dialRaw(t, h.addr)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(ioTimeout))
		_, _ = io.WriteString(c, "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || !resp.Close {
			t.Fatalf("%v %+v", err, resp)
		}
		_, _ = io.ReadAll(resp.Body)
		if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("after the answer: %d %v, want EOF", n, err)
		}
	})
}

// Flushing sends what was written while the handler still runs.
func TestFrontFlush(t *testing.T) {
	release := make(chan struct{})
	h, _ := startFront(t, release)
	c := dialRaw(t, h.addr)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	_, _ = io.WriteString(c, "GET /clusters/c/flush HTTP/1.1\r\nHost: gw\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first" {
		t.Fatalf("before the handler ends: %q %v", first, err)
	}
	close(release)
	if rest, err := io.ReadAll(resp.Body); err != nil || string(rest) != "second" {
		t.Fatalf("after: %q %v", rest, err)
	}
}

// Requests on one connection: pipelined, and a dashboard request followed
// by an API request, over TLS, the API's still seeing TLS.
func TestFrontKeepAliveAndHandOver(t *testing.T) {
	h, clientTLS := startFront(t, nil)
	t.Run("pipelined", func(t *testing.T) {
		c := dialRaw(t, h.addr)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(ioTimeout))
		before := h.srv.front.served.Load()
		_, _ = io.WriteString(c, "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\n\r\nGET /clusters/c/length HTTP/1.1\r\nHost: gw\r\n\r\nGET /api/z HTTP/1.1\r\nHost: gw\r\n\r\n")
		br := bufio.NewReader(c)
		for _, want := range []string{"hello", "0123456789", "api tls=false"} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != want {
				t.Fatalf("got %q, want %q", b, want)
			}
		}
		if n := h.srv.front.served.Load() - before; n != 2 {
			t.Fatalf("front answered %d, want 2", n)
		}
	})
	t.Run("TLS", func(t *testing.T) {
		conn, _, err := dialTLS(t, h.addr, clientTLS)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(ioTimeout))
		br := bufio.NewReader(conn)
		for _, tc := range []struct{ path, want string }{
			{"/clusters/c/context", "server=true local=true remote=true tls=true sni=gateway.test host=gw uri=/clusters/c/context"},
			{"/api/y", "api tls=true"},
			{"/clusters/c/small", "hello"}, // net/http keeps the connection now
		} {
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: gw\r\n\r\n", tc.path)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != tc.want {
				t.Fatalf("%s: %q, want %q", tc.path, b, tc.want)
			}
		}
	})
}

// A head that does not arrive in time ends the connection, as net/http's
// ReadHeaderTimeout does; so does an idle one after IdleTimeout.
func TestFrontTimeouts(t *testing.T) {
	h, _ := startFront(t, nil, func(hs *http.Server) {
		hs.ReadHeaderTimeout = 200 * time.Millisecond
		hs.IdleTimeout = 400 * time.Millisecond
	})
	for _, tc := range []struct{ name, raw string }{
		{"partial head", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\n"},
		{"idle after an answer", "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, h.addr)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(ioTimeout))
			_, _ = io.WriteString(c, tc.raw)
			// Reads until the gateway closes; the ioTimeout deadline says
			// it never did.
			if _, err := io.ReadAll(c); err != nil {
				t.Fatalf("the connection was not closed: %v", err)
			}
		})
	}
}

// ShutdownHTTP closes idle connections at once and lets a request in
// progress finish, telling its client the connection ends.
func TestFrontShutdown(t *testing.T) {
	release := make(chan struct{})
	h, _ := startFront(t, release)
	idle := dialRaw(t, h.addr)
	defer idle.Close()
	_ = idle.SetDeadline(time.Now().Add(ioTimeout))
	_, _ = io.WriteString(idle, "GET /clusters/c/small HTTP/1.1\r\nHost: gw\r\n\r\n")
	ibr := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(ibr, nil); err != nil {
		t.Fatal(err)
	} else {
		_, _ = io.ReadAll(resp.Body)
	}

	busy := dialRaw(t, h.addr)
	defer busy.Close()
	_ = busy.SetDeadline(time.Now().Add(ioTimeout))
	before := h.srv.front.served.Load()
	_, _ = io.WriteString(busy, "GET /clusters/c/wait HTTP/1.1\r\nHost: gw\r\n\r\n")
	for h.srv.front.served.Load() == before {
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() {
		h.srv.ShutdownHTTP(context.Background())
		close(done)
	}()
	if n, err := ibr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("idle connection: %d %v, want EOF", n, err)
	}
	select {
	case <-done:
		t.Fatal("ShutdownHTTP returned with a request in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "done" || !resp.Close {
		t.Fatalf("answer during shutdown: %q close=%t", b, resp.Close)
	}
	select {
	case <-done:
	case <-time.After(ioTimeout):
		t.Fatal("ShutdownHTTP did not return")
	}
}
