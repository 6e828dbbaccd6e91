package testutil

import (
	"io"
	"net/http"
	"sync"
)

// BodyReads counts, by the X-Test-Request header of each request, the
// body bytes a handler read, so that a test can tell a request refused
// unread from one read and then refused, and wait until a handler has
// read so much of a body without sleeping.
type BodyReads struct {
	mu      sync.Mutex
	n       map[string]int64
	waiters []bodyWaiter
	// done is closed, by request, when the handler returned.
	done map[string]chan struct{}
}

type bodyWaiter struct {
	id string
	n  int64
	ch chan struct{}
}

// CountBodyReads wraps h: its requests' bodies are counted in the
// returned BodyReads.
func CountBodyReads(h http.Handler) (http.Handler, *BodyReads) {
	c := &BodyReads{n: map[string]int64{}, done: map[string]chan struct{}{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Test-Request")
		defer close(c.Done(id))
		r.Body = &countedBody{ReadCloser: r.Body, id: id, c: c}
		h.ServeHTTP(w, r)
	}), c
}

// Read is how many bytes of request id's body were read.
func (c *BodyReads) Read(id string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// Reached is closed once at least n bytes of request id's body were read.
func (c *BodyReads) Reached(id string, n int64) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.n[id] >= n {
		close(ch)
	} else {
		c.waiters = append(c.waiters, bodyWaiter{id, n, ch})
	}
	return ch
}

// Done is closed once the handler of request id returned.
func (c *BodyReads) Done(id string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.done[id]
	if !ok {
		ch = make(chan struct{})
		c.done[id] = ch
	}
	return ch
}

type countedBody struct {
	io.ReadCloser
	id string
	c  *BodyReads
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.mu.Lock()
		defer b.c.mu.Unlock()
		b.c.n[b.id] += int64(n)
		kept := b.c.waiters[:0]
		for _, w := range b.c.waiters {
			if w.id == b.id && b.c.n[b.id] >= w.n {
				close(w.ch)
			} else {
				kept = append(kept, w)
			}
		}
		b.c.waiters = kept
	}
	return n, err
}

// SendBody POSTs body to url as request id of BodyReads, with a bearer
// token; n is its Content-Length (-1: sent chunked). err is the client's
// (a connection cut, say); the answer's status and body otherwise.
func SendBody(c *http.Client, url, token, id string, body io.Reader, n int64) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		return 0, "", err
	}
	req.ContentLength = n
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Test-Request", id)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
