package errpage

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWantsHTML(t *testing.T) {
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{"", false},
		{"*/*", false},
		{"application/json", false},
		{"text/html", true},
		// What Chromium sends on a navigation.
		{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7", true},
		{"application/json, text/html;q=0.5", true},
		{"text/html;q=0", false},
		{"text/html;q=0.0", false},
		{"text/plain, TEXT/HTML", true},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		if got := WantsHTML(r); got != tc.want {
			t.Errorf("Accept %q: WantsHTML %v, want %v", tc.accept, got, tc.want)
		}
	}
}

func TestWrite(t *testing.T) {
	e := Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "the link <b>expired</b>", Hint: "run gateway dashboard NAME"}

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Accept", "application/json")
	w := httptest.NewRecorder()
	Write(w, r, e)
	var v map[string]string
	if w.Code != 401 || w.Header().Get("Content-Type") != "application/json" || json.Unmarshal(w.Body.Bytes(), &v) != nil ||
		v["code"] != "unauthenticated" || v["error"] != e.Message || v["message"] != e.Message {
		t.Errorf("JSON answer: %d %q %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}

	r.Header.Set("Accept", "text/html")
	w = httptest.NewRecorder()
	Write(w, r, e)
	body := w.Body.String()
	if w.Code != 401 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("HTML answer: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	for _, want := range []string{"<h1>Unauthorized</h1>", "the link &lt;b&gt;expired&lt;/b&gt;", "run gateway dashboard NAME", "unauthenticated"} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML answer lacks %q:\n%s", want, body)
		}
	}
}
