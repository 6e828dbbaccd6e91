package api

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// DefaultUserBodyBytes is Config.MaxUserBodyBytes's default: room for one
// environment upload at the default images.max_code_mib (50 MiB of code,
// base64 in JSON) and then some.
const DefaultUserBodyBytes = 128 << 20

// BodyBudgetError is the error of a request whose body would take its
// user's request bodies in flight over Config.MaxUserBodyBytes.
type BodyBudgetError struct {
	// InFlight is what the user's other requests carry; Request is this
	// one's (its Content-Length, or what it had sent when it went over).
	InFlight, Request, Limit int64
}

func (e *BodyBudgetError) Error() string {
	return fmt.Sprintf("your requests in flight carry %s and this one %s, over the %s one user may send at once (api.max_user_body_mib): wait for your other uploads to end, then send this one again",
		mib(e.InFlight), mib(e.Request), mib(e.Limit))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// bodyBudget bounds, per user, the request body bytes in flight at once:
// the per-route limits bound one request, and this the many that one user
// may send side by side.
type bodyBudget struct {
	limit int64

	mu   sync.Mutex
	used map[string]int64
}

func newBodyBudget(limit int64) *bodyBudget {
	if limit <= 0 {
		limit = DefaultUserBodyBytes
	}
	return &bodyBudget{limit: limit, used: map[string]int64{}}
}

func (b *bodyBudget) take(user string, n int64) *BodyBudgetError {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u := b.used[user]; u+n > b.limit {
		return &BodyBudgetError{InFlight: u, Request: n, Limit: b.limit}
	}
	b.used[user] += n
	return nil
}

func (b *bodyBudget) give(user string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used[user] -= n; b.used[user] <= 0 {
		delete(b.used, user)
	}
}

// admit charges r's body to user before a byte of it is read: its whole
// Content-Length at once, refused with 429 (413 for one that can never
// fit) without reading it; a body of unknown length is charged as it is
// read, and fails its read with a *BodyBudgetError when over. release
// gives the bytes back once the handler is done with the body.
func (b *bodyBudget) admit(w http.ResponseWriter, r *http.Request, user string) (release func(), ok bool) {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return func() {}, true
	case r.ContentLength > b.limit:
		WriteError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the request body of %s is larger than the %s one user may send at once (api.max_user_body_mib)", mib(r.ContentLength), mib(b.limit)))
		return nil, false
	case r.ContentLength > 0:
		if err := b.take(user, r.ContentLength); err != nil {
			writeBudgetError(w, err)
			return nil, false
		}
		return func() { b.give(user, r.ContentLength) }, true
	}
	m := &meteredBody{ReadCloser: r.Body, b: b, user: user}
	r.Body = m
	return m.release, true
}

func writeBudgetError(w http.ResponseWriter, e *BodyBudgetError) {
	// The body is left unread: the connection cannot carry another request.
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", strconv.Itoa(10))
	WriteError(w, http.StatusTooManyRequests, "too_many_uploads", e.Error())
}

// meteredBody charges a body of unknown length to its user as it is read.
type meteredBody struct {
	io.ReadCloser
	b    *bodyBudget
	user string

	mu    sync.Mutex
	taken int64
}

func (m *meteredBody) Read(p []byte) (int, error) {
	n, err := m.ReadCloser.Read(p)
	if n > 0 {
		m.mu.Lock()
		defer m.mu.Unlock()
		if be := m.b.take(m.user, int64(n)); be != nil {
			be.InFlight -= m.taken
			be.Request = m.taken + int64(n)
			return 0, be
		}
		m.taken += int64(n)
	}
	return n, err
}

func (m *meteredBody) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b.give(m.user, m.taken)
	m.taken = 0
}
